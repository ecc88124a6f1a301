package completion

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/platform"
)

// Timeout bounds the request a shell completion makes: a slow or
// unreachable endpoint must not hang the shell.
const Timeout = time.Second

// API returns the platform of the profile.
type API func() (platform.Platform, error)

// Names completes the names the registry knows, read from the profile's
// endpoint as the profile's principal, within Timeout; nothing when the
// endpoint cannot answer.
type Names struct{ api API }

// NewNames returns the name completer over api.
func NewNames(api API) Names { return Names{api: api} }

// known reads the registry once and returns its target names, tenant
// names (the part of a source before '/') and sources.
func (n Names) known(ctx context.Context) (targets, tenants, sources []string) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	api, err := n.api()
	if err != nil {
		return nil, nil, nil
	}
	items, err := api.ListRegistry(ctx, "", platform.RegistryFilter{})
	if err != nil {
		return nil, nil, nil
	}
	for _, it := range items {
		var source string
		switch {
		case it.Route != nil:
			targets = append(targets, it.Route.Target)
		case it.ACL != nil:
			targets, source = append(targets, it.ACL.Target), it.ACL.Source
		case it.Key != nil:
			source = it.Key.Source
		case it.Ban != nil:
			source = it.Ban.Source
		case it.Quota != nil:
			targets, source = append(targets, it.Quota.Target), it.Quota.Source
		}
		if tenant, _, ok := strings.Cut(source, "/"); ok {
			tenants, sources = append(tenants, tenant), append(sources, source)
		}
	}
	return sortedUnique(targets), sortedUnique(tenants), sortedUnique(sources)
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

func withPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if n != "" && strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// Targets completes target names.
func (n Names) Targets(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	targets, _, _ := n.known(cmd.Context())
	return withPrefix(targets, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// Tenants completes tenant names.
func (n Names) Tenants(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	_, tenants, _ := n.known(cmd.Context())
	return withPrefix(tenants, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// Sources completes bus sources (TENANT/SERVICE).
func (n Names) Sources(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	_, _, sources := n.known(cmd.Context())
	return withPrefix(sources, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// Register gives every command under root that has a --target, --tenant
// or --source flag without a completion of its own the matching
// completion, and tenant-config its TENANT argument's.
func (n Names) Register(root *cobra.Command) {
	funcs := map[string]cobra.CompletionFunc{"target": n.Targets, "tenant": n.Tenants, "source": n.Sources}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for name, fn := range funcs {
			if c.LocalNonPersistentFlags().Lookup(name) == nil {
				continue
			}
			if _, has := c.GetFlagCompletionFunc(name); !has {
				_ = c.RegisterFlagCompletionFunc(name, fn)
			}
		}
		if c.Name() == "tenant-config" && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return n.Tenants(cmd, args, toComplete)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
