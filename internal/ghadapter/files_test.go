package ghadapter

import (
	"context"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/appport"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// oneClient hands out one client, on the strict fake, for every installation.
type oneClient struct{ c *githubapp.Client }

func (o oneClient) Client(int64) (*githubapp.Client, error) { return o.c, nil }

// Each ref has its own cached configuration: one branch's file is never served for another, and
// results older than the TTL are dropped as new ones come in.
func TestGitHubFilesCachesPerRef(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	inst := oneClient{githubapp.New(gh.Client)}
	stubRef := func(ref, yaml string) {
		file := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/contents/{path}", http.StatusOK, "response-if-content-is-a-file")
		file["content"] = base64.StdEncoding.EncodeToString([]byte(yaml))
		file["path"] = appport.ConfigPath
		gh.On("GET", "/repos/Codertocat/Hello-World/contents/.github/latestwins.yml?ref="+ref, http.StatusOK, file)
	}
	stubRef("main", "version: 1\n")
	stubRef("feature", "environments:\n  feature:\n    scopes:\n      api:\n        repository: Codertocat/Hello-World\n        branch: feature\n")
	stubRef("later", "version: 1\n")
	clock := storetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	src, err := NewFiles(inst, authority.New(memory.New(), authority.WithClock(clock)), time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	envs := func(ref string) string {
		t.Helper()
		body, err := src.File(ctx, 1, appport.RepoRef{Owner: "Codertocat", Name: "Hello-World"}, ref)
		if err != nil {
			t.Fatalf("file at %s: %v", ref, err)
		}
		return string(body)
	}
	mainEnvs := envs("main")
	if diff := cmp.Diff(mainEnvs, envs("main")); diff != "" { // from the cache
		t.Errorf("cached main (-first +second):\n%s", diff)
	}
	featureEnvs := envs("feature")
	if cmp.Equal(mainEnvs, featureEnvs) {
		t.Errorf("feature got main's environments %v", featureEnvs)
	}
	if n := len(gh.Requests()); n != 2 {
		t.Errorf("%d GitHub calls, want one per ref", n)
	}
	clock.Advance(2 * time.Minute)
	envs("later")
	if n := src.cachedEntries(); n != 1 {
		t.Errorf("%d cached results after the TTL passed, want only the fresh one", n)
	}
}
