import { configFlags, type Command } from '../cli.js';

const notYet = (): Promise<number> => Promise.reject(new Error('unreachable: planned commands are refused by runCli'));

/**
 * Commands whose components are still being built. They are listed in --help so the CLI's shape is
 * visible now; runCli validates their flags and configuration, then says which issue brings them.
 */
export function plannedCommands(): Command[] {
  return [
    {
      name: 'locks', summary: 'list every locked node with holder, age and classification',
      plannedIn: 6, usesConfig: true, flags: { kubeconfig: configFlags().kubeconfig ?? { type: 'string', description: 'kubeconfig' } }, run: notYet,
    },
  ];
}
