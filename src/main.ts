#!/usr/bin/env node
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCli } from './commands/cli.js';
import { certsCommand } from './commands/certs-command.js';
import { explainCommand } from './commands/explain-command.js';
import { localCommand } from './commands/local-command.js';
import { locksCommand } from './commands/locks-command.js';
import { serveCommand } from './commands/serve-command.js';
import { packageVersion } from './telemetry/build-info.js';

// src/main.ts and dist/main.js both sit one level below the repository root.
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

// `vgpu-warden --help | head` closes the pipe early: that is the reader's choice, not a crash.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

// Installed only by commands that run until stopped, so the others keep Node's default Ctrl-C.
function waitForStopSignal(): Promise<string> {
  return new Promise((resolveSignal) => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const)
      process.once(signal, () => {
        resolveSignal(signal);
      });
  });
}

// Read once: `--version` prints it and serve's vgpu_warden_build_info carries it.
const version = packageVersion();

const commands = [
  serveCommand({ waitForStopSignal, forceExit: (code) => process.exit(code), version }),
  certsCommand(),
  locksCommand(),
  explainCommand(),
  localCommand({ repoRoot, shutdownTarget: process }),
];

process.exitCode = await runCli(
  process.argv.slice(2),
  commands,
  {
    env: process.env,
    stdout: (line) => {
      process.stdout.write(`${line}\n`);
    },
    stderr: (line) => {
      process.stderr.write(`${line}\n`);
    },
  },
  { version },
);
