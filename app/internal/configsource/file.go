package configsource

import (
	"context"
	"fmt"
	"os"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/config"
)

// File is a ConfigSource that reads one local file for every repository and ref (for
// `latestwins serve --config PATH`). The file is read on each call, so edits apply at once.
type File struct {
	Path string
}

var _ core.ConfigSource = (*File)(nil)

// Config reads and parses the file.
func (f *File) Config(_ context.Context, _ int64, _ core.RepoRef, _ string) (*config.Config, error) {
	b, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	cfg, err := config.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return cfg, nil
}

// Where names the file, for messages.
func (f *File) Where() string { return f.Path }
