package completion

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

func registryServer(t *testing.T, h http.HandlerFunc) API {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	api := platform.NewLocal(srv.URL, func() (string, error) { return "tok", nil }, nil)
	return func() (platform.Platform, error) { return api, nil }
}

func items(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/registry") || r.Header.Get("Authorization") != "Bearer tok" {
		http.Error(w, "unexpected", http.StatusTeapot)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"items": []registry.Item{
		{Route: &registry.Route{Target: "orders", Command: "create"}},
		{Route: &registry.Route{Target: "billing", Command: "charge"}},
		{ACL: &registry.ACL{Source: "demo/app", Target: "orders", Command: "create", Allow: true}},
		{Key: &registry.ServiceKey{Source: "acme/billing"}},
		{Ban: &registry.Ban{Source: "demo/batch", Kind: registry.BanGlobal}},
	}})
}

func TestNamesCompleteFromTheRegistry(t *testing.T) {
	n := NewNames(registryServer(t, items))
	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	for _, c := range []struct {
		f      cobra.CompletionFunc
		prefix string
		want   []string
	}{
		{n.Targets, "", []string{"billing", "orders"}},
		{n.Targets, "or", []string{"orders"}},
		{n.Tenants, "", []string{"acme", "demo"}},
		{n.Sources, "demo/", []string{"demo/app", "demo/batch"}},
		{n.Tenants, "zzz", nil},
	} {
		got, dir := c.f(cmd, nil, c.prefix)
		if !slices.Equal(got, c.want) || dir != cobra.ShellCompDirectiveNoFileComp {
			t.Errorf("prefix %q: %v %v; want %v, no files", c.prefix, got, dir, c.want)
		}
	}
}

func TestNamesCompleteNothingOnFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	hung := make(chan struct{})
	t.Cleanup(func() { close(hung) })
	for name, api := range map[string]API{
		"refused":     func() (platform.Platform, error) { return platform.NewLocal(closed, nil, nil), nil },
		"answers 500": registryServer(t, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", 500) }),
		"not JSON":    registryServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) }),
		// Never answers: the completion gives up after Timeout.
		"hangs": registryServer(t, func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-hung:
			}
		}),
	} {
		cmd := &cobra.Command{}
		cmd.SetContext(context.Background())
		start := time.Now()
		got, dir := NewNames(api).Targets(cmd, nil, "")
		if len(got) != 0 || dir != cobra.ShellCompDirectiveNoFileComp {
			t.Errorf("%s: %v %v; want nothing", name, got, dir)
		}
		if took := time.Since(start); took > Timeout+2*time.Second {
			t.Errorf("%s: took %s; the bound is %s", name, took, Timeout)
		}
	}
}

func TestRegisterAttachesToTheNamedFlags(t *testing.T) {
	root := &cobra.Command{Use: "snavio"}
	send := &cobra.Command{Use: "send", Run: func(*cobra.Command, []string) {}}
	send.Flags().String("target", "", "")
	send.Flags().String("source", "", "")
	tail := &cobra.Command{Use: "tail", Run: func(*cobra.Command, []string) {}}
	tail.Flags().String("tenant", "", "")
	tail.Flags().String("target", "", "")
	own := cobra.FixedCompletions([]string{"mine"}, cobra.ShellCompDirectiveNoFileComp)
	_ = tail.RegisterFlagCompletionFunc("target", own)
	tc := &cobra.Command{Use: "tenant-config", Run: func(*cobra.Command, []string) {}}
	root.AddCommand(send, tail, tc)
	NewNames(registryServer(t, items)).Register(root)

	for _, c := range []struct {
		cmd  *cobra.Command
		flag string
	}{{send, "target"}, {send, "source"}, {tail, "tenant"}} {
		if _, ok := c.cmd.GetFlagCompletionFunc(c.flag); !ok {
			t.Errorf("%s --%s has no completion", c.cmd.Name(), c.flag)
		}
	}
	if f, _ := tail.GetFlagCompletionFunc("target"); f == nil {
		t.Fatal("tail --target lost its completion")
	} else if got, _ := f(tail, nil, ""); !slices.Equal(got, []string{"mine"}) {
		t.Errorf("a command's own completion was replaced: %v", got)
	}
	tc.SetContext(context.Background())
	if got, _ := tc.ValidArgsFunction(tc, nil, "a"); !slices.Equal(got, []string{"acme"}) {
		t.Errorf("tenant-config's argument completes %v, want [acme]", got)
	}
	if got, _ := tc.ValidArgsFunction(tc, []string{"acme"}, ""); got != nil {
		t.Errorf("a second argument completes %v", got)
	}
}
