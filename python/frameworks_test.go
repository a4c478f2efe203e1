package python_test

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lavender-ml/lavender/internal/testkit"
)

// frameworksTarball is where the real frameworks are kept: shared/ sits
// beside the clone (see its frameworks/README.md); $LAVENDER_FRAMEWORKS_TGZ
// names another copy.
func frameworksTarball() string {
	if p := os.Getenv("LAVENDER_FRAMEWORKS_TGZ"); p != "" {
		return p
	}
	return filepath.Join("..", "..", "shared", "frameworks", "fw.tgz")
}

// realFrameworks is the directory holding transformers, accelerate, TRL and
// Lightning: $LAVENDER_FRAMEWORKS as given, else the tarball extracted once
// into a cache directory named after its hash (extracting it takes longer
// than most tests).
func realFrameworks(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("LAVENDER_FRAMEWORKS"); d != "" {
		return d
	}
	tgz := frameworksTarball()
	sum, err := fileSHA256(tgz)
	if errors.Is(err, os.ErrNotExist) {
		testkit.Unavailable(t, "no real frameworks: %s is missing (shared/ belongs beside the clone), and LAVENDER_FRAMEWORKS is not set", tgz)
	}
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "lavender-frameworks", sum[:16])
	if _, err := os.Stat(filepath.Join(dir, "fw", "lightning")); err == nil {
		return filepath.Join(dir, "fw")
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "extract-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	if err := untgz(tgz, tmp); err != nil {
		t.Fatalf("extract %s: %v", tgz, err)
	}
	// Another test process may have finished first: its copy is as good.
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "fw", "lightning")); statErr != nil {
			t.Fatalf("keep the extracted frameworks: %v", err)
		}
	}
	return filepath.Join(dir, "fw")
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// untgz extracts the regular files and directories of a .tar.gz into dst,
// refusing any name that would land outside it.
func untgz(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%q would land outside %s", h.Name, dst)
		}
		path := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

// realFrameworkTests are the Python test modules that need the real
// frameworks (tests/test_real_*.py), as unittest names them.
func realFrameworkTests(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("tests", "test_real_*.py"))
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	for _, f := range files {
		mods = append(mods, "tests."+strings.TrimSuffix(filepath.Base(f), ".py"))
	}
	return mods
}

// TestRealFrameworks runs tests/test_real_*.py, one interpreter per file,
// with Debian's torch and the real transformers, accelerate, TRL and
// Lightning on the path: the callbacks as those frameworks drive them, and
// signals stopping each run as the framework alone would.
func TestRealFrameworks(t *testing.T) {
	t.Parallel()
	python := torchPython(t)
	fw := realFrameworks(t)
	mods := realFrameworkTests(t)
	if len(mods) == 0 {
		t.Fatal("no tests/test_real_*.py")
	}
	var runs []unittestRun
	for _, mod := range mods {
		runs = append(runs, unittestRun{name: strings.TrimPrefix(mod, "tests."), python: python, args: []string{mod},
			env: append([]string{"LAVENDER_FRAMEWORKS=" + fw}, oneThreadTorch...)})
	}
	runConcurrently(t, runs)
}
