# shellcheck shell=bash
# The approvals gate (internal/authority/approval.go) and its doors: a commit deploys only once
# enough distinct people with the right permission approved that commit there.
mutant "the same person's approval counted twice" internal/authority/approval.go \
  's/if slices\.ContainsFunc\(m\.Approvals, func\(a CommitApproval\) bool \{ return strings\.EqualFold\(a\.Login, r\.Login\) \}\) \{/if false {/' \
  TestConformance/Approvals/HeldUntilDistinctPeopleApproved
mutant "the pusher's own approval counted" internal/authority/approval.go \
  's/case r\.ExcludePusher && strings\.EqualFold\(a\.Login, ref\.Actor\):/case false:/' \
  TestApprovalsPusherOwnApproval ./internal/authority/
mutant "an approval carried to the newer commit that supersedes it" internal/authority/policy.go \
  's/\t\t\t\tnewest\.Since = s\n/\t\t\t\tnewest.Since, newest.Approvals = s, r.Approvals\n/' \
  TestConformance/Approvals/SupersededCommitDropsOut
mutant "an approval lands on every pending commit" internal/authority/approval.go \
  's/if strings\.HasPrefix\(m\.Sha, r\.Sha\) && !m\.Rollback \{/if !m.Rollback {/' \
  TestApprovalsBelongToOneCommit ./internal/authority/
mutant "the gate lets a commit go short of its approvals" internal/authority/approval.go \
  's/if len\(by\) >= r\.Count \{/if len(by) >= 0 {/' \
  TestConformance/Approvals/HeldUntilDistinctPeopleApproved
mutant "the evaluator counts a login the approvers do not name" internal/authority/approval.go \
  's/if _, _, team := SplitTeam\(a\); team \|\| strings\.EqualFold\(a, login\) \{/if _, _, team := SplitTeam(a); team || true {/' \
  TestApprovalsApproversRecheckedByLogin ./internal/authority/
mutant "an approval taken from a door that is no person's" internal/authority/approval.go \
  's/case ApprovalDoorComment, ApprovalDoorPage, ApprovalDoorCLI:\n\tdefault:/case ApprovalDoorComment, ApprovalDoorPage, ApprovalDoorCLI:\n\tcase "never":/' \
  TestApprovalsRefusals ./internal/authority/
mutant "a workflow token approves through the command line" internal/cli/approvals.go \
  's/if c\.env\("api"\) != "" \{/if false {/' \
  TestApproveFromTheCommandLine ./internal/cli/
mutant "the comment door lets anyone with write permission approve" app/internal/core/approvals.go \
  's/if rule == nil \|\| len\(rule\.Approvers\) == 0 \{/if true {/' \
  TestCommentApprove ./app/
mutant "a team invitation counts as membership among the approvers" internal/githubapp/teams.go \
  's/return m\.State == "active", nil/return true, nil/' \
  TestTeamMember ./internal/githubapp/
mutant "the comment door skips the write permission for approve" app/internal/comments/command.go \
  's/CommandRollback, CommandUnfreeze, CommandPromote, CommandApprove:/CommandRollback, CommandUnfreeze, CommandPromote:/' \
  TestCommentApprove ./app/
mutant "the status rows leave out what a commit waits for at the approvals gate" internal/report/status.go \
  's/\tr\.ApprovalWait, r\.Approval = approvalWait\(v, now\)\n//' \
  TestApproveFromTheCommandLine ./internal/cli/
mutant "a repeat of a rule's approver is let through the file" internal/config/approvals.go \
  's/\t\tif seen\[strings\.ToLower\(a\)\] \{\n\t\t\tp\.addf/\t\tif false {\n\t\t\tp.addf/' \
  TestApprovalsParseErrors ./internal/config/
mutant "the page's Approve button approves for someone not among the approvers" app/internal/web/approve.go \
  's/\tif !ok \{\n\t\tpa\.log\.InfoContext\(ctx, "status page: approval refused, not an approver"\)/\tif !ok \&\& false {\n\t\tpa.log.InfoContext(ctx, "status page: approval refused, not an approver")/' \
  TestApproveButton ./app/
