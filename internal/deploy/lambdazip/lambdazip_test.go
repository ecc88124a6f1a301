package lambdazip

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestPackMakesOneExecutableBootstrap(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	body := bytes.Repeat([]byte("\x7fELF binary "), 1000)
	if err := os.WriteFile(bin, body, 0o755); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.zip"), filepath.Join(dir, "b.zip")
	for _, out := range []string{a, b} {
		if err := Pack(out, bin); err != nil {
			t.Fatal(err)
		}
	}
	za, _ := os.ReadFile(a)
	zb, _ := os.ReadFile(b)
	if !bytes.Equal(za, zb) {
		t.Error("the same binary gave two different zips")
	}
	r, err := zip.OpenReader(a)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.File) != 1 || r.File[0].Name != "bootstrap" || r.File[0].Mode().Perm() != 0o755 {
		t.Fatalf("entries %v, want one bootstrap with mode 0755", r.File)
	}
	rc, err := r.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, body) {
		t.Error("the entry is not the binary")
	}
}

func TestPackRefusesMissingAndDirectory(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.zip")
	for _, bin := range []string{filepath.Join(dir, "missing"), dir} {
		if err := Pack(out, bin); err == nil {
			t.Errorf("Pack(%s): no error", bin)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("Pack(%s) left %s behind", bin, out)
		}
	}
}

func TestCheck(t *testing.T) {
	var good bytes.Buffer
	if err := Write(&good, bytes.NewReader([]byte("\x7fELF"))); err != nil {
		t.Fatal(err)
	}
	if err := Check(good.Bytes()); err != nil {
		t.Errorf("Check(a packed bootstrap) = %v", err)
	}
	var other bytes.Buffer
	zw := zip.NewWriter(&other)
	w, _ := zw.Create("handler.js")
	_, _ = w.Write([]byte("x"))
	_ = zw.Close()
	for name, b := range map[string][]byte{"not a zip": []byte("hello"), "no bootstrap": other.Bytes(), "empty": nil} {
		if err := Check(b); err == nil {
			t.Errorf("Check(%s) = nil, want an error", name)
		}
	}
}

// FuzzCheck: Check never panics on any input.
func FuzzCheck(f *testing.F) {
	var good bytes.Buffer
	_ = Write(&good, bytes.NewReader([]byte("\x7fELF")))
	f.Add(good.Bytes())
	f.Add([]byte("PK\x03\x04"))
	f.Fuzz(func(t *testing.T, b []byte) { _ = Check(b) })
}
