package githubapp_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

// compareAnswer is GitHub's documented compare answer with status and files named names (a
// "old=new" name is a rename).
func compareAnswer(t *testing.T, status string, names ...string) map[string]any {
	t.Helper()
	answer := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/compare/{basehead}", http.StatusOK, "")
	answer["status"] = status
	example := answer["files"].([]any)[0].(map[string]any)
	files := []any{}
	for _, n := range names {
		f := map[string]any{}
		for k, v := range example {
			f[k] = v
		}
		delete(f, "previous_filename")
		f["filename"], f["status"] = n, "modified"
		if from, to, renamed := strings.Cut(n, "="); renamed {
			f["filename"], f["previous_filename"], f["status"] = to, from, "renamed"
		}
		files = append(files, f)
	}
	answer["files"] = files
	return answer
}

// TestCompareListsTheChangedFiles: the compare API's status and the files it lists, a renamed file
// under both names; a list at GitHub's cap of 300 files may be cut, so the files are unknown.
func TestCompareListsTheChangedFiles(t *testing.T) {
	t.Parallel()
	gh, c := newClient(t)
	gh.On("GET", "/repos/o/r/compare/aaa...bbb", http.StatusOK, compareAnswer(t, "ahead", "migrations/001.sql", "docs/old.md=docs/new.md"))
	got, err := c.Compare(t.Context(), "o", "r", "aaa", "bbb")
	if err != nil {
		t.Fatal(err)
	}
	want := &githubapp.Comparison{Status: "ahead", Files: []string{"migrations/001.sql", "docs/new.md", "docs/old.md"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("comparison (-want +got):\n%s", diff)
	}

	many := make([]string, githubapp.MaxComparedFiles)
	for i := range many {
		many[i] = fmt.Sprintf("f%d", i)
	}
	gh.On("GET", "/repos/o/r/compare/aaa...ccc", http.StatusOK, compareAnswer(t, "diverged", many...))
	if got, err = c.Compare(t.Context(), "o", "r", "aaa", "ccc"); err != nil || got.Status != "diverged" || got.Files != nil {
		t.Errorf("a comparison at the cap: %+v, %v; want its files unknown (nil)", got, err)
	}
}
