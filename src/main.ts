#!/usr/bin/env node
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCli } from './cli.js';
import { localCommand } from './commands/local-command.js';
import { plannedCommands } from './commands/planned-commands.js';

// src/main.ts and dist/main.js both sit one level below the repository root.
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const commands = [...plannedCommands(), localCommand({ repoRoot, shutdownTarget: process })];

process.exitCode = await runCli(process.argv.slice(2), commands, {
  env: process.env,
  stdout: (line) => { process.stdout.write(`${line}\n`); },
  stderr: (line) => { process.stderr.write(`${line}\n`); },
});
