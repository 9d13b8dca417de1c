package app

import (
	"encoding/base64"
	"net/http"
	"sync"
	"testing"

	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

const (
	fixtureRepo      = "/repos/Codertocat/Hello-World"
	fixtureComment   = 492700400 // issue_comment.created.json's comment, on pull request #1
	fixtureInstallID = 1
)

// fixedInstallations hands out one client, on the strict fake, and records which installations were asked for.
type fixedInstallations struct {
	c   *githubapp.Client
	mu  sync.Mutex
	ids []int64
}

var _ ghadapter.Installations = (*fixedInstallations)(nil)

func (f *fixedInstallations) Client(id int64) (*githubapp.Client, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids = append(f.ids, id)
	return f.c, nil
}

func (f *fixedInstallations) asked() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.ids...)
}

func newGitHub(t *testing.T) (*githubtest.Server, *fixedInstallations) {
	t.Helper()
	gh := githubtest.New(t)
	return gh, &fixedInstallations{c: githubapp.New(gh.Client)}
}

// withGitHub wires the App's GitHub ports to installations.
func withGitHub(inst ghadapter.Installations) func(*Options) {
	return func(o *Options) {
		o.Dispatcher = &ghadapter.Dispatcher{Installations: inst}
		o.Conversation = &ghadapter.Conversation{Installations: inst}
	}
}

type call struct {
	Method, Path string
	Body         any
}

func calls(reqs []githubtest.Request) []call {
	out := make([]call, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, call{r.Method, r.Path, r.Body})
	}
	return out
}

func stubReaction(t *testing.T, gh *githubtest.Server) *githubtest.Stub {
	t.Helper()
	body := githubtest.Example(t, "POST", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", http.StatusCreated, "")
	body["content"] = githubapp.ReactionEyes
	return gh.On("POST", fixtureRepo+"/issues/comments/{comment_id}/reactions", http.StatusCreated, body)
}

func stubPermission(gh *githubtest.Server, user, permission string) *githubtest.Stub {
	return gh.On("GET", fixtureRepo+"/collaborators/"+user+"/permission", http.StatusOK,
		`{"permission":"`+permission+`","role_name":"`+permission+`","user":null}`)
}

func stubReply(t *testing.T, gh *githubtest.Server) *githubtest.Stub {
	t.Helper()
	body := githubtest.Example(t, "POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", http.StatusCreated, "")
	return gh.On("POST", fixtureRepo+"/issues/1/comments", http.StatusCreated, body)
}

func stubDispatch(t *testing.T, gh *githubtest.Server, workflow string) *githubtest.Stub {
	t.Helper()
	return gh.On("POST", fixtureRepo+"/actions/workflows/"+workflow+"/dispatches", http.StatusOK,
		githubtest.Example(t, "POST", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches", http.StatusOK, ""))
}

func stubConfig(t *testing.T, gh *githubtest.Server, yaml string) *githubtest.Stub {
	t.Helper()
	file := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/contents/{path}", http.StatusOK, "response-if-content-is-a-file")
	file["content"] = base64.StdEncoding.EncodeToString([]byte(yaml))
	file["path"] = ".github/latestwins.yml"
	return gh.On("GET", fixtureRepo+"/contents/.github/latestwins.yml", http.StatusOK, file)
}

// replyOf is the body of the comment a stubbed reply received.
func replyOf(t *testing.T, st *githubtest.Stub) string {
	t.Helper()
	reqs := st.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d replies, want 1", len(reqs))
	}
	m, _ := reqs[0].Body.(map[string]any)
	s, _ := m["body"].(string)
	return s
}
