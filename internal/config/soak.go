package config

import (
	"gopkg.in/yaml.v3"

	"github.com/latestwins/latestwins/internal/authority"
)

// soak reads an environment's soak: (see docs/config.md).
func (p *parser) soak(env string, k, v *yaml.Node) *authority.Soak { return nil }
