# shellcheck shell=bash
# The command line: a secret's value never shows in help or usage.
mutant "a secret read from its variable shows as the flag's default" internal/cli/settings.go \
  's/\tc\.typedVar\(name, "", nil\)\n\}/\tif v := c.env(name); v != "" {\n\t\t*p = v\n\t\tc.fs.Lookup(name).DefValue = v\n\t}\n}/' \
  TestHelpNeverShowsSecrets ./internal/cli/
