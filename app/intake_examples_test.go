package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/app/internal/intake"
	"github.com/latestwins/latestwins/internal/testutil"
)

// examplesIndex is GitHub's published webhook examples (npm @octokit/webhooks-examples, pinned by
// tools/webhooks/package-lock.json; scripts/gen-webhook-fixtures installs it).
var examplesIndex = filepath.Join("..", "tools", "webhooks", "node_modules", "@octokit", "webhooks-examples", "api.github.com", "index.json")

// unparsableExamples are examples of used events GitHub's package carries that are not what GitHub
// sends: check_run[7] and [8] have "2018-04-25 20:42:10" timestamps, which are not RFC 3339
// (testdata/webhooks/check_run.rerequested.json is check_run[7] with them fixed).
var unparsableExamples = map[string]bool{"check_run[7]": true, "check_run[8]": true}

// Every example GitHub publishes, signed: an event the App does not use is acknowledged 202
// without being parsed (discussion, package and sponsorship among them, which go-github v60 cannot
// parse); one it uses is parsed and handled, never refused as malformed.
func TestGitHubExamples(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(examplesIndex)
	if os.IsNotExist(err) {
		testutil.MissingTool(t, "GitHub's webhook examples are not installed: run npm ci --prefix tools/webhooks")
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var index []struct {
		Name     string            `json:"name"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatalf("%s: %v", examplesIndex, err)
	}
	h := newHarness(t, testConfig)
	var used, unused int
	for _, def := range index {
		for i, ex := range def.Examples {
			name := fmt.Sprintf("%s[%d]", def.Name, i)
			id := strings.NewReplacer("[", "-", "]", "").Replace(name)
			rd := readings[(used+unused)%len(readings)] // every way a body can arrive, in turn
			rec := h.do(rd.request(def.Name, id, ex, sign(testSecret, ex)))
			switch {
			case !intake.UsedEvents[def.Name]:
				unused++
				res := decodeResult(t, rec)
				if rec.Code != http.StatusAccepted || res.Outcome != core.OutcomeIgnored {
					t.Errorf("%s (not used): %d %s, want 202 ignored", name, rec.Code, rec.Body)
				}
			case unparsableExamples[name]:
				used++
				if rec.Code != http.StatusBadRequest {
					t.Errorf("%s: %d %s; it has timestamps go-github cannot parse, want 400 (update unparsableExamples)", name, rec.Code, rec.Body)
				}
			default:
				used++
				if rec.Code >= 400 {
					t.Errorf("%s: %d %s, want it handled", name, rec.Code, rec.Body)
				}
			}
		}
	}
	t.Logf("%d examples of events the App uses, %d of events it does not", used, unused)
	if used == 0 || unused == 0 {
		t.Errorf("%d used and %d unused examples: the index is not what it was", used, unused)
	}
	checkIntakeIdle(t, h.app)
}
