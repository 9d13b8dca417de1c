package githubapp_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// botComment is an issue comment written by an App, as the sticky comments are.
func botComment(t *testing.T, id int64, body string) map[string]any {
	t.Helper()
	c := issueComment(t, id, body)
	user := c["user"].(map[string]any)
	user["login"], user["type"] = "latestwins[bot]", "Bot"
	return c
}

// A person's comment holding the hidden marker (pasted, or quoted in a reply) is neither updated nor
// taken for the sticky comment: the App's own comment is, and without one a new comment is created.
func TestUpsertCommentIgnoresAPersonsCommentWithTheMarker(t *testing.T) {
	t.Parallel()
	const marker = "<!-- latestwins:prod -->"
	const list = "/repos/o/r/issues/7/comments"
	cases := map[string]struct {
		comments []any
		want     []call
		wantID   int64
	}{
		"only a person's comment has it": {
			comments: []any{issueComment(t, 1, "> quoting\n"+marker)},
			want:     []call{{"GET", list, nil}, {"POST", list, map[string]any{"body": marker + "\nstatus"}}},
			wantID:   3,
		},
		"a person's comment before the App's": {
			comments: []any{issueComment(t, 1, marker+"\nmine now"), botComment(t, 2, marker+"\nold")},
			want:     []call{{"GET", list, nil}, {"PATCH", "/repos/o/r/issues/comments/2", map[string]any{"body": marker + "\nstatus"}}},
			wantID:   2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			gh, c := newClient(t)
			gh.On("GET", list, http.StatusOK, tc.comments)
			if tc.want[1].Method == "POST" {
				gh.On("POST", list, http.StatusCreated, botComment(t, 3, marker+"\nstatus"))
			} else {
				gh.On("PATCH", tc.want[1].Path, http.StatusOK, botComment(t, 2, marker+"\nstatus"))
			}
			id, err := c.UpsertComment(context.Background(), "o", "r", 7, marker, marker+"\nstatus")
			if err != nil {
				t.Fatal(err)
			}
			if id != tc.wantID {
				t.Errorf("id = %d, want %d", id, tc.wantID)
			}
			if diff := cmp.Diff(tc.want, calls(gh.Requests())); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}
