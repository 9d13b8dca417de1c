# shellcheck shell=bash
# Sourced by scripts/mutants: the soak gate holds a commit until it has been live in each required
# environment for its soak, counted from when it first went live there, and never a rollback.

# When the soak counts from: the commit's first going live, kept across a redeploy and by the store.
mutant "the soak counts from the newest deploy" internal/authority/soak.go \
  's/\tsince := live\.since\(\)\n/\tsince := live.At\n/' \
  TestSoakRedeployKeepsItsStart ./internal/authority/
mutant "a redeploy of the live commit restarts its soak" internal/authority/rollback.go \
  's/\tif s\.Live != nil && s\.Live\.Sha == l\.Sha \{\n\t\tl\.Since = s\.Live\.since\(\)/\tif false {\n\t\tl.Since = s.Live.since()/' \
  TestConformance/Soak/HeldUntilLiveForTheSoak
mutant "the store drops when the live commit first went live, where its soak counts from" internal/authority/codec.go \
  's/,\n\t\tSn: nanos\(l\.Since\)\}/}/' \
  TestConformance/Soak/HeldUntilLiveForTheSoak

# Ancestor mode: a busy staging does not restart it.
mutant "the soak is ignored in ancestor mode" internal/authority/soak.go \
  's/if v\.Requires == nil \|\| ref == nil \|\| v\.Gates == nil/if v.Requires == nil || v.Requires.Ancestor || ref == nil || v.Gates == nil/' \
  TestConformance/Soak/DescendantsDoNotRestartIt
mutant "nothing records where an ancestor soak counts from" internal/authority/soak.go \
  's/if e\.Requires == nil \|\| !e\.Requires\.Ancestor \|\|/if true ||/' \
  TestConformance/Soak/DescendantsDoNotRestartIt
mutant "the deploy gate does not record where an ancestor soak counts from" internal/authority/transitions.go \
  's/\tif e\.noteSoakStarts\(gen, scopes, req\) \{/\tif false {/' \
  TestConformance/Soak/DescendantsDoNotRestartIt
mutant "the sweep does not record where a head's ancestor soak counts from" internal/authority/sweep.go \
  's/noted := d\.Env\.noteHeadSoakStarts\(req\)/noted := false/' \
  TestSoakSweepKeepsTheStartOfAHeadNoGateAsks ./internal/authority/
mutant "a newer descendant moves the soak's start later" internal/authority/soak.go \
  's/ok && ancestor && from\.Before\(since\)/ok \&\& ancestor \&\& since.Before(from)/' \
  TestSoakBusyStagingDoesNotStarveAncestorMode ./internal/authority/
mutant "the store drops where the soak counts from" internal/authority/codec.go \
  's/,\n\t\tSf: encodeSoakFrom\(m\.SoakFrom\)\}/}/' \
  TestConformance/Soak/DescendantsDoNotRestartIt
mutant "where a soak counts from is lost when the refusal repeats itself" internal/authority/transitions.go \
  's/\t\te\.forgetRefusals\(gen, scopes\)\n//' \
  TestSoakAncestorSightingWhileFrozenIsKept ./internal/authority/

# Its end and what the gate says.
mutant "a commit is still held at exactly the soak's end" internal/authority/soak.go \
  's/\t\tif !now\.Before\(ends\) \{/\t\tif now.After(ends) {/' \
  TestSoakHoldsUntilItsEnd ./internal/authority/
mutant "the retry-after of a soak rounds down" internal/authority/soak.go \
  's/secs := \(w\.Ends\.Sub\(now\) \+ time\.Second - 1\) \/ time\.Second/secs := w.Ends.Sub(now) \/ time.Second/' \
  TestSoakHoldsUntilItsEnd ./internal/authority/
mutant "the gate names the soak that ends first" internal/authority/soak.go \
  's/wait == nil \|\| ends\.After\(wait\.Ends\)/wait == nil || ends.Before(wait.Ends)/' \
  TestSoakNamesTheRequiredEnvironmentThatEndsLast ./internal/authority/
mutant "a soak per required environment is ignored" internal/authority/soak.go \
  's/if d, ok := s\.Environments\[env\]; ok \{/if d, ok := s.Environments[env]; false \&\& ok {/' \
  TestSoakNamesTheRequiredEnvironmentThatEndsLast ./internal/authority/
mutant "a rollback is held by the soak" internal/authority/decide.go \
  's/\tif ref == nil \|\| ref\.Rollback \{\n\t\t\/\/ A rollback is the way back/\tif ref == nil {\n\t\t\/\/ A rollback is the way back/' \
  TestSoakNeverHoldsARollback ./internal/authority/

# The doors that set it.
mutant "a soak longer than a week is taken" internal/authority/soak.go \
  's/if s\.For < 0 \|\| s\.For > MaxSoak \{/if s.For < 0 {/' \
  TestSoakValidate ./internal/authority/
mutant "a soak in an environment not required is taken" internal/authority/soak.go \
  's/if req != nil && !slices\.Contains\(req\.Environments, name\) \{/if false {/' \
  TestSoakValidate ./internal/authority/
mutant "the file takes a soak without requires" internal/config/soak.go \
  's/\tif len\(e\.Requires\) == 0 \{/\tif false {/' \
  TestSoakSettingProblems ./internal/config/
mutant "the file takes a soak in an environment it does not require" internal/config/soak.go \
  's/if name := value\.Content\[i\]; !slices\.Contains\(e\.Requires, name\.Value\) \{/if name := value.Content[i]; false \&\& name != nil {/' \
  TestSoakSettingProblems ./internal/config/
mutant "--soak none keeps the soak" internal/cli/soak.go \
  's/\tcase "none":\n\t\treturn &authority\.Soak\{\}, nil/\tcase "none":\n\t\treturn nil, nil/' \
  TestSoakFromTheCommandLine ./internal/cli/
