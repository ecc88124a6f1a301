package awsstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

var _ snapshot.Store = (*SnapshotStore)(nil)

// One narrow interface per S3 operation the snapshot store calls;
// *s3.Client has them all.
type (
	PutObjectAPI interface {
		PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	}
	GetObjectAPI interface {
		GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	}
	HeadObjectAPI interface {
		HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	}
	CopyObjectAPI interface {
		CopyObject(ctx context.Context, in *s3.CopyObjectInput, optFns ...func(*s3.Options)) (*s3.CopyObjectOutput, error)
	}
)

// Object layout of one document path (docs/store/aws.md, "Snapshots on
// S3"): the path without its leading '/' is the key of the latest
// document; versions and their put-order markers live beside it.
const (
	versionsSuffix = ".versions/"
	orderSuffix    = ".order/"
	// metaVersion and metaSHA256 are user metadata of every version
	// object, carried to the latest object by the server-side copy.
	metaVersion = "snavio-version"
	metaSHA256  = "snavio-sha256"
	// MaxSnapshotBytes bounds one version's body, as the embedded store's.
	MaxSnapshotBytes = 256 << 20
	maxVersionLen    = 128
	// maxPathLen leaves room under S3's 1024-byte key limit for the
	// order suffix, a time key and a version.
	maxPathLen = 800
)

// SnapshotStore is snapshot.Store on one S3 bucket. Build it with
// NewSnapshotStore; it is safe for concurrent use.
type SnapshotStore struct {
	bucket string
	clock  clock.Clock
	put    PutObjectAPI
	get    GetObjectAPI
	head   HeadObjectAPI
	copy   CopyObjectAPI
	list   s3.ListObjectsV2APIClient
}

// NewSnapshotStore returns the snapshot store on cfg.SnapshotBucket, on an
// S3 client built from cfg.AWSConfig and cfg.S3Options.
func NewSnapshotStore(cfg Config) (*SnapshotStore, error) {
	cfg.SetDefaults()
	err := cfg.Validate()
	if cfg.SnapshotBucket == "" {
		err = errors.Join(err, errors.New("awsstore: no snapshot bucket: set the S3 bucket that holds registry snapshots"))
	}
	if err != nil {
		return nil, err
	}
	c := s3.NewFromConfig(cfg.AWSConfig, cfg.S3Options...)
	return &SnapshotStore{bucket: cfg.SnapshotBucket, clock: cfg.Clock, put: c, get: c, head: c, copy: c, list: c}, nil
}

// snapshotKey checks a document path and returns the key of its latest
// object. A path is '/' then '/'-separated non-empty segments, none ending
// in ".versions" or ".order", so no path's key falls among another path's
// versions or markers.
func snapshotKey(op, path string) (string, error) {
	bad := func(why string) error {
		return fmt.Errorf("awsstore snapshots: %s: path %.60q %s", op, path, why)
	}
	if !strings.HasPrefix(path, "/") || len(path) < 2 || len(path) > maxPathLen {
		return "", bad(fmt.Sprintf("must start with '/' and be 2 to %d bytes (/snavio/registry/snapshot/latest.json)", maxPathLen))
	}
	if !utf8.ValidString(path) {
		return "", bad("is not valid UTF-8")
	}
	for _, seg := range strings.Split(path[1:], "/") {
		switch {
		case seg == "" || seg == "." || seg == "..":
			return "", bad("has an empty, '.' or '..' segment")
		case strings.HasSuffix(seg, strings.TrimSuffix(versionsSuffix, "/")), strings.HasSuffix(seg, strings.TrimSuffix(orderSuffix, "/")):
			return "", bad("has a segment ending in .versions or .order, which the store reserves")
		}
	}
	return path[1:], nil
}

// checkVersion accepts a version name usable as the last segment of a key.
func checkVersion(op, path, version string) error {
	if version == "" || len(version) > maxVersionLen {
		return fmt.Errorf("awsstore snapshots: %s %s: version %.40q must be 1 to %d bytes", op, path, version, maxVersionLen)
	}
	for _, r := range version {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:+-", r)) {
			return fmt.Errorf("awsstore snapshots: %s %s: version %.40q: use letters, digits and . _ : + - only (it names an S3 object)", op, path, version)
		}
	}
	return nil
}

// apiCode is the error code of an S3 error response, "" for other errors.
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Put implements snapshot.Store: the version object is created with
// If-None-Match: *, so a version is written once; then an empty order
// marker records when it was put, for Versions.
func (s *SnapshotStore) Put(ctx context.Context, path, version string, body []byte) error {
	key, err := snapshotKey("put", path)
	if err != nil {
		return err
	}
	if err := checkVersion("put", path, version); err != nil {
		return err
	}
	if len(body) > MaxSnapshotBytes {
		return fmt.Errorf("awsstore snapshots: put %s %s: %d bytes, over the limit of %d: %w", path, version, len(body), MaxSnapshotBytes, snapshot.ErrTooLarge)
	}
	sum := sha256Hex(body)
	vkey := key + versionsSuffix + version
	for attempt := 0; ; attempt++ {
		_, err = s.put.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(s.bucket), Key: aws.String(vkey),
			Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
			ContentType: aws.String("application/json"),
			IfNoneMatch: aws.String("*"),
			Metadata:    map[string]string{metaVersion: version, metaSHA256: sum},
		})
		// S3 answers 409 ConditionalRequestConflict while another
		// conditional write of the key is in flight: try again.
		if apiCode(err) != "ConditionalRequestConflict" || attempt >= 4 {
			break
		}
	}
	switch {
	case err == nil:
	case apiCode(err) == "PreconditionFailed":
		if err := s.sameBody(ctx, path, version, vkey, sum); err != nil {
			return err
		}
		// The same body again: write the marker again too, in case the
		// first Put stopped before it; Versions keeps the earliest.
	default:
		return fmt.Errorf("awsstore snapshots: put %s version %s: %w", path, version, err)
	}
	_, err = s.put.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key + orderSuffix + timeKey(s.clock.Now()) + "-" + version),
		Body: bytes.NewReader(nil), ContentLength: aws.Int64(0),
	})
	if err != nil {
		return fmt.Errorf("awsstore snapshots: put %s version %s: the version is stored but its order marker is not (put it again): %w", path, version, err)
	}
	return nil
}

// sameBody checks that the existing version object holds the body whose
// SHA-256 is sum, by its metadata (one HEAD, not a download).
func (s *SnapshotStore) sameBody(ctx context.Context, path, version, vkey, sum string) error {
	out, err := s.head.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(vkey)})
	if err != nil {
		return fmt.Errorf("awsstore snapshots: put %s version %s: it exists, and reading it failed: %w", path, version, err)
	}
	if out.Metadata[metaSHA256] != sum {
		return fmt.Errorf("awsstore snapshots: %s version %s: %w: versions are immutable, name a new one", path, version, snapshot.ErrExists)
	}
	return nil
}

// copySource is the URL-encoded bucket/key of a CopyObject source.
func copySource(bucket, key string) string {
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return bucket + "/" + strings.Join(segs, "/")
}

// Promote implements snapshot.Store with one server-side CopyObject of the
// version onto the latest key: S3 replaces an object atomically, so a
// reader gets the previous document or this one, whole, with its version
// in the copied metadata.
func (s *SnapshotStore) Promote(ctx context.Context, path, version string) error {
	key, err := snapshotKey("promote", path)
	if err != nil {
		return err
	}
	if err := checkVersion("promote", path, version); err != nil {
		return err
	}
	_, err = s.copy.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key),
		CopySource: aws.String(copySource(s.bucket, key+versionsSuffix+version)),
	})
	switch {
	case err == nil:
		return nil
	case apiCode(err) == "NoSuchKey":
		return fmt.Errorf("awsstore snapshots: promote %s version %s: put it first: %w", path, version, snapshot.ErrNotFound)
	default:
		return fmt.Errorf("awsstore snapshots: promote %s version %s: %w", path, version, err)
	}
}

// read gets one object, refusing one over maxBytes without reading more
// than maxBytes+1 bytes of it.
func (s *SnapshotStore) read(ctx context.Context, key string, maxBytes int64) ([]byte, map[string]string, error) {
	out, err := s.get.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		if apiCode(err) == "NoSuchKey" {
			return nil, nil, snapshot.ErrNotFound
		}
		return nil, nil, err
	}
	defer out.Body.Close()
	if n := aws.ToInt64(out.ContentLength); n > maxBytes {
		return nil, nil, fmt.Errorf("%d bytes, over the caller's limit of %d: %w", n, maxBytes, snapshot.ErrTooLarge)
	}
	// Sized from Content-Length: a cold start reads tens of MB, which
	// io.ReadAll would copy through a dozen growing buffers.
	var buf bytes.Buffer
	if n := aws.ToInt64(out.ContentLength); n > 0 {
		buf.Grow(int(n) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(io.LimitReader(out.Body, max(maxBytes, 0)+1)); err != nil {
		return nil, nil, err
	}
	b := buf.Bytes()
	if int64(len(b)) > maxBytes {
		return nil, nil, fmt.Errorf("over the caller's limit of %d bytes: %w", maxBytes, snapshot.ErrTooLarge)
	}
	return b, out.Metadata, nil
}

// Latest implements snapshot.Store: one GetObject of the latest key.
func (s *SnapshotStore) Latest(ctx context.Context, path string, maxBytes int64) (string, []byte, error) {
	key, err := snapshotKey("latest", path)
	if err != nil {
		return "", nil, err
	}
	b, meta, err := s.read(ctx, key, maxBytes)
	if err != nil {
		if errors.Is(err, snapshot.ErrNotFound) {
			return "", nil, fmt.Errorf("awsstore snapshots: %s has no latest version: %w", path, err)
		}
		return "", nil, fmt.Errorf("awsstore snapshots: latest of %s: %w", path, err)
	}
	version := meta[metaVersion]
	if checkVersion("latest", path, version) != nil {
		return "", nil, fmt.Errorf("awsstore snapshots: s3://%s/%s has no valid %s metadata (%.40q): it was not promoted by this store; promote a version again", s.bucket, key, metaVersion, version)
	}
	return version, b, nil
}

// Get implements snapshot.Store: one GetObject of the version.
func (s *SnapshotStore) Get(ctx context.Context, path, version string, maxBytes int64) ([]byte, error) {
	key, err := snapshotKey("get", path)
	if err != nil {
		return nil, err
	}
	if err := checkVersion("get", path, version); err != nil {
		return nil, err
	}
	b, _, err := s.read(ctx, key+versionsSuffix+version, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("awsstore snapshots: %s version %s: %w", path, version, err)
	}
	return b, nil
}

// Versions implements snapshot.Store: the order markers listed in key
// order, which is put order by the putting store's clock (ties by name);
// a version put more than once counts at its first put.
func (s *SnapshotStore) Versions(ctx context.Context, path string) ([]string, error) {
	key, err := snapshotKey("versions", path)
	if err != nil {
		return nil, err
	}
	prefix := key + orderSuffix
	var out []string
	seen := map[string]bool{}
	p := s3.NewListObjectsV2Paginator(s.list, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("awsstore snapshots: versions of %s: %w", path, err)
		}
		for _, o := range page.Contents {
			version, err := markerVersion(strings.TrimPrefix(aws.ToString(o.Key), prefix))
			if err != nil {
				return nil, fmt.Errorf("awsstore snapshots: versions of %s: s3://%s/%s: %w (delete the object)", path, s.bucket, aws.ToString(o.Key), err)
			}
			if !seen[version] {
				seen[version] = true
				out = append(out, version)
			}
		}
	}
	return out, nil
}

// markerVersion decodes the version of an order marker's name:
// "<time key, 20 digits>-<version>".
func markerVersion(name string) (string, error) {
	if len(name) < 22 || name[20] != '-' || strings.Trim(name[:20], "0123456789") != "" {
		return "", fmt.Errorf("%q is not an order marker (<20 digits>-<version>)", name)
	}
	if err := checkVersion("versions", "", name[21:]); err != nil {
		return "", err
	}
	return name[21:], nil
}
