package awstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

var emu Emulators

// TestMain stops the emulators after the tests; the test wrapper exits
// with m.Run's result.
func TestMain(m *testing.M) {
	defer emu.Close()
	m.Run()
}

func TestDynamoDBLocalAnswersOnLoopbackOnly(t *testing.T) {
	d := emu.DynamoDB(t)
	if !strings.HasPrefix(d.Endpoint, "http://127.0.0.1:") {
		t.Fatalf("endpoint %s is not on 127.0.0.1", d.Endpoint)
	}
	c := dynamodb.NewFromConfig(d.Config(), d.ClientOptions()...)
	if _, err := c.ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "linux" {
		return
	}
	// The kernel's socket table: the listener's local address must be
	// loopback (IPv4, or IPv4-mapped on an IPv6 socket), never a wildcard.
	p, err := strconv.Atoi(d.Endpoint[strings.LastIndexByte(d.Endpoint, ':')+1:])
	if err != nil {
		t.Fatal(err)
	}
	hex := fmt.Sprintf(":%04X", p)
	found := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 4 || fs[3] != "0A" || !strings.HasSuffix(fs[1], hex) {
				continue
			}
			found++
			addr := strings.TrimSuffix(fs[1], hex)
			if addr != "0100007F" && addr != "0000000000000000FFFF00000100007F" {
				t.Errorf("DynamoDB Local listens on %s (%s), not on loopback", fs[1], f)
			}
		}
	}
	if found == 0 {
		t.Fatalf("no listening socket on port %d in /proc/net/tcp{,6}", p)
	}
}

// recorder stands in for testing.TB to see whether unavailable fails or
// skips.
type recorder struct {
	testing.TB
	failed, skipped string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Fatalf(f string, a ...any) { r.failed = fmt.Sprintf(f, a...) }
func (r *recorder) Skipf(f string, a ...any)  { r.skipped = fmt.Sprintf(f, a...) }

func TestUnavailableFailsInCIAndSkipsElsewhere(t *testing.T) {
	err := errors.New("java missing")
	var ci, local recorder
	unavailable(&ci, true, err)
	unavailable(&local, false, err)
	if ci.failed == "" || ci.skipped != "" || !strings.Contains(ci.failed, "java missing") {
		t.Fatalf("CI=true: failed %q skipped %q", ci.failed, ci.skipped)
	}
	if local.skipped == "" || local.failed != "" || !strings.Contains(local.skipped, "java missing") {
		t.Fatalf("outside CI: failed %q skipped %q", local.failed, local.skipped)
	}
}

func TestMissingJarSaysHowToInstall(t *testing.T) {
	t.Setenv(JarEnv, "/nonexistent/DynamoDBLocal.jar")
	_, err := StartDynamoDBLocal(context.Background())
	if err == nil || !strings.Contains(err.Error(), JarEnv) {
		t.Fatalf("err = %v", err)
	}
}
