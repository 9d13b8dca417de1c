package config

import "gopkg.in/yaml.v3"

// approvals reads an environment's approvals:, approvers: and pusher-may-approve: (see
// docs/config.md).
func (p *parser) approvals(e *Environment, k, v *yaml.Node) {}
