package cli

import "github.com/latestwins/latestwins/internal/authority"

// gates reads the flags of the environment's gates (--soak, --approvals, --windows): nil when none
// is given, so that the stored gates stay; a gate whose flag is not given keeps its stored value.
func (c *cmdEnv) gates() (*authority.Gates, error) {
	var g authority.Gates
	var err error
	if g.Soak, err = c.soakFlag(); err != nil {
		return nil, err
	}
	if g.Approvals, err = c.approvalsFlag(); err != nil {
		return nil, err
	}
	if g.Windows, err = c.windowsFlag(); err != nil {
		return nil, err
	}
	if g == (authority.Gates{}) {
		return nil, nil
	}
	return &g, nil
}
