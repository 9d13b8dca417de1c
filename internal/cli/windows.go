package cli

import "github.com/latestwins/latestwins/internal/authority"

// windowsFlag reads --windows: nil when not given.
func (c *cmdEnv) windowsFlag() (*authority.Windows, error) { return nil, nil }
