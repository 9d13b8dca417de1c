package cli

import "github.com/latestwins/latestwins/internal/authority"

// soakFlag reads --soak: nil when not given.
func (c *cmdEnv) soakFlag() (*authority.Soak, error) { return nil, nil }
