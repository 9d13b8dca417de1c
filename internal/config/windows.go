package config

import (
	"gopkg.in/yaml.v3"

	"github.com/latestwins/latestwins/internal/authority"
)

// windows reads an environment's windows: (see docs/config.md).
func (p *parser) windows(env string, k, v *yaml.Node) *authority.Windows { return nil }
