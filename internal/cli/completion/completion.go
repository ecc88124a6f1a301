// Package completion implements `snavio completion`.
package completion

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
)

// Shells are the shells completion scripts exist for.
var Shells = []string{"bash", "zsh", "fish", "powershell"}

// NewCmd builds `snavio completion SHELL`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print the shell completion script",
		Long: `Print the completion script for a shell to standard output.

Release archives and packages also ship these scripts in completions/.

The bash script needs the bash-completion package (Debian and Ubuntu:
apt-get install bash-completion; macOS: brew install bash-completion@2);
without it bash prints "_get_comp_words_by_ref: command not found".
Queue, target, tenant and source names complete from the profile's
dispatcher, as the profile's token may see them (within a second, and
nothing when it cannot be reached); profile names from the config file.`,
		Example: `  # bash, for the current shell
  source <(snavio completion bash)

  # zsh, installed for every session
  snavio completion zsh > "${fpath[1]}/_snavio"

  # fish
  snavio completion fish > ~/.config/fish/completions/snavio.fish

  # PowerShell
  snavio completion powershell | Out-String | Invoke-Expression`,
		ValidArgs:             Shells,
		DisableFlagsInUseLine: true,
		Args:                  cmdutil.ExactArgs(1, "one shell: bash, zsh, fish or powershell"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return Write(cmd.Root(), f.IOStreams.Out, args[0])
		},
	}
}

// Write writes root's completion script for shell to w.
func Write(root *cobra.Command, w io.Writer, shell string) error {
	switch shell {
	case "bash":
		return root.GenBashCompletionV2(w, true)
	case "zsh":
		return root.GenZshCompletion(w)
	case "fish":
		return root.GenFishCompletion(w, true)
	case "powershell":
		return root.GenPowerShellCompletionWithDesc(w)
	default:
		return cmdutil.Usagef("unsupported shell %q: use bash, zsh, fish or powershell", shell)
	}
}

// FileName is the file, under completions/, that holds shell's script.
func FileName(shell string) string {
	switch shell {
	case "bash":
		return "snavio.bash"
	case "zsh":
		return "_snavio"
	case "fish":
		return "snavio.fish"
	case "powershell":
		return "snavio.ps1"
	}
	panic(fmt.Sprintf("completion.FileName: unknown shell %q", shell))
}
