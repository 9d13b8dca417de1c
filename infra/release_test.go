package infra

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// moduleSource is how docs/deploy.md states the release it is for and the Terraform module's source
// string, once.
var moduleSource = regexp.MustCompile("`(github\\.com/latestwins/latestwins//infra/terraform\\?ref=(v[0-9]+\\.[0-9]+\\.[0-9]+))`")

// releaseVersion matches a release version (vMAJOR.MINOR.PATCH, with an optional pre-release suffix).
var releaseVersion = regexp.MustCompile(`\bv[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?\b`)

// TestDocumentedRelease checks that docs/deploy.md states the Terraform module's source once, for
// one release, and that every release version in docs/deploy.md and the example root module is that
// one; and, where the checkout carries .release-version (the release workflow commits it under the
// tags it moves), that it is the release.
func TestDocumentedRelease(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	sources := moduleSource.FindAllStringSubmatch(string(doc), -1)
	if len(sources) != 1 {
		t.Fatalf("docs/deploy.md states the module's source %d times, want once: `github.com/latestwins/latestwins//infra/terraform?ref=vX.Y.Z`", len(sources))
	}
	release := sources[0][2]
	if !strings.Contains(string(doc), "This page is for release `"+release+"`.") {
		t.Errorf("docs/deploy.md does not say it is for release %s next to the module's source", release)
	}
	example, err := os.ReadFile(filepath.Join(tfModule, "examples", "basic", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"docs/deploy.md": string(doc), "infra/terraform/examples/basic/main.tf": string(example)} {
		found := releaseVersion.FindAllString(text, -1)
		if len(found) == 0 {
			t.Errorf("%s names no release", name)
		}
		for _, v := range found {
			if v != release {
				t.Errorf("%s names %s; the release it is for is %s", name, v, release)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join("..", ".release-version")); err == nil {
		if v := strings.TrimSpace(string(b)); v != release {
			t.Errorf(".release-version is %s, docs/deploy.md is for %s", v, release)
		}
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
}
