package gitref

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
)

var _ authority.RecordLister = (*Store)(nil)

// ListRecords returns the records of one environment whose keys begin with prefix (which must
// name the environment: "intent#ENV#"), from one fetch of its records ref: for moving it to
// another store (latestwins migrate --from --to), never on a request path.
func (s *Store) ListRecords(ctx context.Context, prefix string) ([]authority.Record, error) {
	group := recordGroup(prefix)
	if group == "" {
		return nil, fmt.Errorf("list records: prefix %q names no environment (give KIND#ENV#)", prefix)
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	if err := s.refresh(ctx, []string{group}); err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	g := s.groups[group]
	var out []authority.Record
	for _, tree := range g.root {
		for _, blob := range g.leaves[tree] {
			var r authority.Record
			if err := json.Unmarshal(g.blobs[blob], &r); err != nil {
				return nil, fmt.Errorf("list records: decode a record of %s: %w", group, err)
			}
			if strings.HasPrefix(r.Key, prefix) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}
