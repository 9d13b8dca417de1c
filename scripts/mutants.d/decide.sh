# The deploy gate's one decision (internal/authority/decide.go) and the doors that ask it: a
# deployment status counts only for a deployment the protection rule approved.
mutant "a deployment status counts for a deployment nobody approved" internal/authority/outbox.go \
  's/if approved == nil \|\| approved\.Sha != r\.Sha \{/if false {/' \
  TestDeploymentStatusOfAnUnapprovedDeployment ./app/
mutant "the protection rule records no approval" app/protection.go \
  's/v\.approve && dep > 0 \{/false \&\& dep > 0 {/' \
  TestDeploymentStatusClosesTheLoop/success ./app/
mutant "the status rows leave an unapproved deployment out" internal/report/status.go \
  's/\t\tr\.Warning = u\.Text\(\)\n//' \
  TestStatusShowsAnUnapprovedDeployment ./internal/report/
