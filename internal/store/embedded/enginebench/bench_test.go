// Package enginebench measures the two candidate engines of the embedded
// store, go.etcd.io/bbolt and modernc.org/sqlite, on this machine, in one
// run: committed single-write transactions per second (fsync on every
// commit), batched writes per second, concurrent single-record commits, and
// crash safety under SIGKILL. It is a separate module so that the engine
// that lost does not enter the main module's go.mod.
//
// Run: cd internal/store/embedded/enginebench && go test -count=1 -v .
package enginebench

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	_ "modernc.org/sqlite"
)

const childEnv = "ENGINEBENCH_CHILD"

var bucket = []byte("r")

// engine is the little each candidate must do for the measurement.
type engine interface {
	// put commits the records [from, from+n) in one transaction.
	put(from, n int) error
	// putConcurrent commits one record from one of many goroutines; bbolt
	// may coalesce these (db.Batch), sqlite serialises them.
	putConcurrent(i int) error
	has(i int) (bool, error)
	close() error
}

func value() []byte {
	v := make([]byte, 256)
	for i := range v {
		v[i] = byte(i)
	}
	return v
}

func key(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }

type boltEngine struct{ db *bolt.DB }

func openBolt(path string) (engine, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bucket); return err }); err != nil {
		return nil, err
	}
	return &boltEngine{db: db}, nil
}

func (e *boltEngine) put(from, n int) error {
	v := value()
	return e.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for i := from; i < from+n; i++ {
			if err := b.Put(key(i), v); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *boltEngine) putConcurrent(i int) error {
	v := value()
	return e.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key(i), v) })
}

func (e *boltEngine) has(i int) (bool, error) {
	var ok bool
	err := e.db.View(func(tx *bolt.Tx) error { ok = tx.Bucket(bucket).Get(key(i)) != nil; return nil })
	return ok, err
}

func (e *boltEngine) close() error { return e.db.Close() }

type sqliteEngine struct{ db *sql.DB }

func openSQLite(path string) (engine, error) {
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS r (k INTEGER PRIMARY KEY, v BLOB NOT NULL)`); err != nil {
		return nil, err
	}
	return &sqliteEngine{db: db}, nil
}

func (e *sqliteEngine) put(from, n int) error {
	v := value()
	tx, err := e.db.BeginTx(context.Background(), nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st, err := tx.Prepare(`INSERT OR REPLACE INTO r (k, v) VALUES (?, ?)`)
	if err != nil {
		return err
	}
	for i := from; i < from+n; i++ {
		if _, err := st.Exec(i, v); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (e *sqliteEngine) putConcurrent(i int) error { return e.put(i, 1) }

func (e *sqliteEngine) has(i int) (bool, error) {
	var n int
	err := e.db.QueryRow(`SELECT count(*) FROM r WHERE k = ?`, i).Scan(&n)
	return n == 1, err
}

func (e *sqliteEngine) close() error { return e.db.Close() }

var engines = []struct {
	name string
	open func(string) (engine, error)
}{
	{"bbolt", openBolt},
	{"sqlite", openSQLite},
}

func openByName(name, path string) (engine, error) {
	for _, e := range engines {
		if e.name == name {
			return e.open(path)
		}
	}
	return nil, fmt.Errorf("unknown engine %q", name)
}

// TestMain turns the test binary into the crash test's writer when started
// with ENGINEBENCH_CHILD=<engine>:<path>: it commits one record per
// transaction and prints "<i>\n" only after the commit returned, until it
// is killed.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(child(spec))
	}
	os.Exit(m.Run())
}

func child(spec string) int {
	name, path, ok := cut(spec)
	if !ok {
		fmt.Fprintln(os.Stderr, "bad", childEnv, spec)
		return 2
	}
	e, err := openByName(name, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		if err := e.put(i, 1); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(w, "%d\n", i)
		w.Flush()
	}
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == ':' {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// TestEngines prints, for each engine, the figures docs/store/embedded.md
// records.
func TestEngines(t *testing.T) {
	const window = 3 * time.Second
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			dir := t.TempDir()
			e, err := eng.open(filepath.Join(dir, "bench.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer e.close()

			// Single-record transactions, each committed with fsync.
			n, start := 0, time.Now()
			for time.Since(start) < window {
				if err := e.put(n, 1); err != nil {
					t.Fatal(err)
				}
				n++
			}
			single := rate(n, time.Since(start))

			// Batches of 100 records per transaction.
			const batch = 100
			base, m := 1_000_000, 0
			start = time.Now()
			for time.Since(start) < window {
				if err := e.put(base+m, batch); err != nil {
					t.Fatal(err)
				}
				m += batch
			}
			batched := rate(m, time.Since(start))

			// 16 goroutines each committing single records.
			const workers = 16
			var wg sync.WaitGroup
			var mu sync.Mutex
			total := 0
			start = time.Now()
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := 0; time.Since(start) < window; k++ {
						if err := e.putConcurrent(2_000_000 + w*1_000_000 + k); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						total++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			concurrent := rate(total, time.Since(start))

			crashes, acked := crashTest(t, eng.name, 3)
			fi, _ := os.Stat(filepath.Join(dir, "bench.db"))
			fmt.Printf("RESULT engine=%s single_tx_per_s=%.0f batched_records_per_s=%.0f (batch %d) concurrent16_records_per_s=%.0f crash_runs=%d acked_checked=%d file_bytes=%d\n",
				eng.name, single, batched, batch, concurrent, crashes, acked, fi.Size())
		})
	}
}

// crashTest starts runs writer children, SIGKILLs each after it has
// acknowledged a few hundred records (mid-stream: it is committing the next
// one), reopens the file and checks every acknowledged record is there.
func crashTest(t *testing.T, name string, runs int) (int, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for r := range runs {
		path := filepath.Join(t.TempDir(), "crash.db")
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+name+":"+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		last := -1
		killAt := 200 + 150*r
		for sc.Scan() {
			i, err := strconv.Atoi(sc.Text())
			if err != nil {
				t.Fatalf("child wrote %q", sc.Text())
			}
			if i != last+1 {
				t.Fatalf("child acknowledged %d after %d", i, last)
			}
			last = i
			if i == killAt {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		_ = cmd.Wait()
		e, err := openByName(name, path)
		if err != nil {
			t.Fatalf("%s: reopen after SIGKILL: %v", name, err)
		}
		for i := 0; i <= last; i++ {
			ok, err := e.has(i)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Fatalf("%s: acknowledged record %d missing after SIGKILL (last acknowledged %d)", name, i, last)
			}
		}
		checked += last + 1
		if err := e.close(); err != nil {
			t.Fatal(err)
		}
	}
	return runs, checked
}
