package awsstore

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// tickingClock is a fake clock that moves 1 ms forward at every reading,
// so that every Put has its own time without the test sleeping.
func tickingClock() clock.Clock {
	var n atomic.Int64
	return clock.Func(func() time.Time { return t0.Add(time.Duration(n.Add(1)) * time.Millisecond) })
}

// newSnapshotStore makes a snapshot store on a bucket of its own in the
// binary's gofakes3, counting calls in c (nil: not counted).
func newSnapshotStore(t *testing.T, c *awstest.Calls, clk clock.Clock) (*SnapshotStore, *s3.Client) {
	t.Helper()
	f := emu.S3()
	cfg := Config{Env: "test", AWSConfig: f.Config(), S3Options: f.ClientOptions(), SnapshotBucket: f.NewBucketName(), Clock: clk}
	raw := s3.NewFromConfig(cfg.AWSConfig, cfg.S3Options...)
	if _, err := raw.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(cfg.SnapshotBucket)}); err != nil {
		t.Fatal(err)
	}
	if c != nil {
		cfg.S3Options = append(slices.Clip(cfg.S3Options), func(o *s3.Options) { o.APIOptions = append(o.APIOptions, c.Count) })
	}
	s, err := NewSnapshotStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, raw
}

func TestSnapshotStoreOnGofakes3(t *testing.T) {
	began := time.Now()
	dispatchtest.TestSnapshotStore(t, func(t *testing.T) snapshot.Store {
		s, _ := newSnapshotStore(t, nil, tickingClock())
		return s
	})
	t.Logf("dispatchtest.TestSnapshotStore on gofakes3: %v", time.Since(began).Round(time.Millisecond))
}

// TestSnapshotVersionsInPutOrder checks put order where it differs from
// name order, and that putting a version again keeps its first place.
func TestSnapshotVersionsInPutOrder(t *testing.T) {
	ctx := context.Background()
	s, _ := newSnapshotStore(t, nil, tickingClock())
	const path = "/snavio/registry/acl/latest.json"
	for _, v := range []string{"v10", "v9", "v2", "v10"} {
		if err := s.Put(ctx, path, v, []byte("body of "+strings.TrimSuffix(v, "x"))); err != nil {
			t.Fatal(err)
		}
	}
	if vs, err := s.Versions(ctx, path); err != nil || !slices.Equal(vs, []string{"v10", "v9", "v2"}) {
		t.Fatalf("Versions = %v %v; want [v10 v9 v2]", vs, err)
	}
	// Versions put at the same instant are listed by name.
	same, _ := newSnapshotStore(t, nil, clock.NewFake(t0))
	for _, v := range []string{"b", "a"} {
		if err := same.Put(ctx, path, v, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if vs, err := same.Versions(ctx, path); err != nil || !slices.Equal(vs, []string{"a", "b"}) {
		t.Fatalf("Versions at one instant = %v %v; want [a b]", vs, err)
	}
}

// TestSnapshotCallsPerOperation counts the S3 calls of each method
// (docs/store/aws.md, "Snapshots on S3").
func TestSnapshotCallsPerOperation(t *testing.T) {
	ctx := context.Background()
	var c awstest.Calls
	s, _ := newSnapshotStore(t, &c, tickingClock())
	const path = "/snavio/registry/snapshot/latest.json"
	body := []byte(`{"format":"snavio.registry.snapshot/v1"}`)
	checkCalls(t, &c, []callCase{
		{"Put", func() error { return s.Put(ctx, path, "v1", body) }, map[string]int{"PutObject": 2}},
		{"Put again, same body", func() error { return s.Put(ctx, path, "v1", body) }, map[string]int{"PutObject": 2, "HeadObject": 1}},
		{"Put again, other body (ErrExists)", func() error {
			if err := s.Put(ctx, path, "v1", []byte("other")); !errors.Is(err, snapshot.ErrExists) {
				return errors.New("not ErrExists")
			}
			return nil
		}, map[string]int{"PutObject": 1, "HeadObject": 1}},
		{"Promote", func() error { return s.Promote(ctx, path, "v1") }, map[string]int{"CopyObject": 1}},
		{"Latest", func() error {
			v, b, err := s.Latest(ctx, path, 1<<20)
			if err == nil && (v != "v1" || !bytes.Equal(b, body)) {
				err = errors.New("wrong version or body")
			}
			return err
		}, map[string]int{"GetObject": 1}},
		{"Get", func() error { _, err := s.Get(ctx, path, "v1", 1<<20); return err }, map[string]int{"GetObject": 1}},
		{"Versions", func() error { _, err := s.Versions(ctx, path); return err }, map[string]int{"ListObjectsV2": 1}},
	})
}

// TestSnapshotLayout checks the objects in the bucket: the spec's path is
// the key of the latest document, which is the whole document, so the
// cold start reads it with one GET.
func TestSnapshotLayout(t *testing.T) {
	ctx := context.Background()
	s, raw := newSnapshotStore(t, nil, tickingClock())
	const path = "/snavio/registry/snapshot/latest.json"
	if err := s.Put(ctx, path, "20261121T120000.000Z", []byte("doc")); err != nil {
		t.Fatal(err)
	}
	if err := s.Promote(ctx, path, "20261121T120000.000Z"); err != nil {
		t.Fatal(err)
	}
	out, err := raw.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	want := []string{
		"snavio/registry/snapshot/latest.json",
		"snavio/registry/snapshot/latest.json.order/" + timeKey(t0.Add(time.Millisecond)) + "-20261121T120000.000Z",
		"snavio/registry/snapshot/latest.json.versions/20261121T120000.000Z",
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys:\n%s\nwant:\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}
}

// TestSnapshotRefusesForeignObjects: an object at a latest key that this
// store did not promote, or a stray object among the markers, is an error
// naming it, never a version or ErrNotFound.
func TestSnapshotRefusesForeignObjects(t *testing.T) {
	ctx := context.Background()
	s, raw := newSnapshotStore(t, nil, tickingClock())
	put := func(key string) {
		t.Helper()
		if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	put("a/latest.json")
	if _, _, err := s.Latest(ctx, "/a/latest.json", 100); err == nil || errors.Is(err, snapshot.ErrNotFound) || !strings.Contains(err.Error(), "s3://"+s.bucket+"/a/latest.json") {
		t.Fatalf("Latest of a foreign object: %v", err)
	}
	put("a/latest.json.order/stray")
	if _, err := s.Versions(ctx, "/a/latest.json"); err == nil || !strings.Contains(err.Error(), "stray") {
		t.Fatalf("Versions with a stray marker: %v", err)
	}
	// Put of a version whose object was written without the store's
	// checksum metadata: ErrExists, since the store cannot vouch for it.
	put("a/latest.json.versions/v1")
	if err := s.Put(ctx, "/a/latest.json", "v1", []byte("x")); !errors.Is(err, snapshot.ErrExists) {
		t.Fatalf("Put over a foreign version object: %v; want ErrExists", err)
	}
}

func TestSnapshotBadInput(t *testing.T) {
	ctx := context.Background()
	s, _ := newSnapshotStore(t, nil, tickingClock())
	for _, tc := range []struct{ path, version, want string }{
		{"snavio/latest.json", "v1", "must start with '/'"},
		{"/", "v1", "must start with '/'"},
		{"/a//b", "v1", "empty"},
		{"/a/../b", "v1", "'..'"},
		{"/a.versions/b", "v1", "reserves"},
		{"/a/b.order", "v1", "reserves"},
		{"/" + strings.Repeat("x", maxPathLen), "v1", "2 to 800 bytes"},
		{"/a\xff", "v1", "UTF-8"},
		{"/a", "", "1 to 128 bytes"},
		{"/a", "v/1", "letters, digits"},
		{"/a", "v 1", "letters, digits"},
	} {
		errs := []error{
			s.Put(ctx, tc.path, tc.version, []byte("x")),
			s.Promote(ctx, tc.path, tc.version),
		}
		_, err := s.Get(ctx, tc.path, tc.version, 10)
		errs = append(errs, err)
		for _, err := range errs {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("path %q version %q: %v; want an error saying %q", tc.path, tc.version, err, tc.want)
			}
		}
	}
	if err := s.Put(ctx, "/a", "v1", make([]byte, MaxSnapshotBytes+1)); !errors.Is(err, snapshot.ErrTooLarge) {
		t.Errorf("Put over the limit: %v", err)
	}
	for _, bucket := range []string{"", "Upper", "a_b", "ab"} {
		_, err := NewSnapshotStore(Config{Env: "test", AWSConfig: aws.Config{Region: "us-east-1"}, SnapshotBucket: bucket})
		if err == nil || !strings.Contains(err.Error(), "bucket") {
			t.Errorf("bucket %q: %v; want an error about the bucket", bucket, err)
		}
	}
}

// FuzzSnapshotKeys: an accepted path's key never falls under another
// path's versions or markers, and a marker name decodes to the version it
// was made from.
func FuzzSnapshotKeys(f *testing.F) {
	f.Add("/snavio/registry/snapshot/latest.json", "20261121T120000.000Z", int64(0))
	f.Add("/a.versions/b", "v1", int64(-1))
	f.Add("/a/b", "v/1", int64(1<<62))
	f.Fuzz(func(t *testing.T, path, version string, ns int64) {
		key, err := snapshotKey("fuzz", path)
		if err == nil {
			for _, seg := range strings.Split(key, "/") {
				if strings.HasSuffix(seg, ".versions") || strings.HasSuffix(seg, ".order") || seg == "" {
					t.Fatalf("path %q accepted with key %q", path, key)
				}
			}
		}
		if checkVersion("fuzz", path, version) != nil {
			if _, err := markerVersion(timeKey(time.Unix(0, ns)) + "-" + version); err == nil {
				t.Fatalf("marker of invalid version %q decoded", version)
			}
			return
		}
		if got, err := markerVersion(timeKey(time.Unix(0, ns)) + "-" + version); err != nil || got != version {
			t.Fatalf("marker of %q decoded as %q, %v", version, got, err)
		}
		_, _ = markerVersion(version) // never panics
	})
}
