// Package sbx is corral's provider for Docker Sandboxes: microVMs with
// their own kernel and Docker daemon, driven only through the `sbx` CLI
// (docs.docker.com/reference/cli/sbx). There is no API or SDK; every call
// is one `sbx` invocation with an argv (never a shell string), and sbx
// keeps its own login (`sbx login`).
//
// # CLI calls
//
//   - create: `sbx create --name <name> --quiet [--cpus N] [--memory M]
//     [--template IMAGE] <agent> <workspace>`. The workspace is a host
//     directory corral makes under Options.StateDir (with SourceDir's
//     contents), which sbx mounts at the same path inside; its path is the
//     handle's WorkspaceRoot, so no `pwd` exec is needed.
//   - network: `sbx policy allow|deny network --sandbox <name> <RESOURCES>`
//     before the sandbox first starts, RESOURCES one comma-separated
//     argument (Options.AllowNetwork, Options.DenyNetwork); NetworkDeny is
//     a per-sandbox deny of "**" (deny rules win over allows, so deny with
//     an allow list is refused). An egress allow-list (CreateOptions.Egress)
//     is one more per-sandbox allow rule, sbx taking corral's forms as
//     they are, but only with Options.EgressDefaultDenied: per-sandbox
//     allows add to the machine's default policy, which corral cannot
//     read, so without that promise the list is refused (egress.go).
//   - resume and list: `sbx ls --json` ({"sandboxes":[{name, agent,
//     status, ports, workspaces}]}, a banner line before it skipped); a
//     name not listed is NotFound; a stopped sandbox starts on its next
//     exec.
//   - exec: `sbx exec [-i] [-u user] -w <dir> [--env-file /dev/fd/3]
//     <name> <argv…>`, flags before the name. Commands run under
//     sandbox/execproc's pid-reporting wrapper; the environment (create
//     env, SetEnv's overlay, the command's) goes as a docker env file on a
//     pipe handed to the child as descriptor 3: never in argv (the
//     reference sent `-e K=V`, visible in ps), never on disk. An env file
//     cannot carry a line break, so such a value is InvalidArgument.
//   - kill: execproc's group kill, run as a second `sbx exec` (SIGTERM to
//     the group, the grace, SIGKILL, verified); abandoning a stream kills
//     the host client only, as the command outlives it (docker exec).
//   - ports: `sbx ports <name> --json`, and `sbx ports <name> --publish
//     <port>` when it is not yet published; the URL is the host address.
//   - destroy: `sbx rm --force <name>` (gone is fine) and corral's host
//     directory.
//
// Files go through sandbox/execfs over `sbx exec` (output is raw bytes, so
// no encoding is needed). Names are NamePrefix plus the key, shortened
// with a digest when it does not fit the CLI's characters or 63 bytes;
// corral's record next to the workspace marks its sandboxes for `corral
// sandbox ls/prune --provider sbx` (the CLI has no labels).
//
// Errors: sbx not on PATH is FailedPrecondition naming the binary; the
// CLI's login messages (on host verbs only, never a command's output)
// are PermissionDenied naming `sbx login`; "not found" is NotFound,
// "already exists" AlreadyExists, an unknown flag InvalidArgument (a CLI
// version corral does not expect).
//
// # Differences from the reference (TanStack's sbxSandbox)
//
// Secrets never in argv (env file on a pipe instead of -e K=V); the
// workspace is a bind-mounted host directory instead of a --clone of a
// host git repository (so a sandbox needs no repository, and
// durableFilesystem holds); killableProcesses and writableStdin are
// measured true against the fake (the reference had both false,
// unmeasured); no machine-preset check (`sbx policy ls`, `policy init`):
// corral adds per-sandbox rules only. Snapshots and fork are
// unsupported; ownProcessTable is not claimed (the fake's sandboxes are
// host processes).
//
// The fake (sbxfake) is a real program the tests build; its package doc
// lists what it imitates.
package sbx
