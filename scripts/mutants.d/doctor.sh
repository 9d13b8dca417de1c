# shellcheck shell=bash
# Sourced by scripts/mutants: latestwins doctor's checks must be able to fail.
mutant "doctor forges its wrong-signature ping with the App's own secret" internal/cli/doctor.go \
  's/\twrong := "not-" \+ d\.ds\.secret \+ "-" \+ hex\.EncodeToString\(b\[:\]\)/\twrong := d.ds.secret + hex.EncodeToString(b[:0])/' \
  TestDoctorAllGreen ./internal/cli/
mutant "doctor takes an App that refuses the signed ping as one with the right secret" internal/cli/doctor.go \
  's/\tcase resp\.StatusCode == http\.StatusUnauthorized:\n\t\treturn failed\(fmt\.Sprintf\("the App refused a ping signed/\tcase false:\n\t\treturn failed(fmt.Sprintf("the App refused a ping signed/' \
  TestDoctorWrongWebhookSecret ./internal/cli/
