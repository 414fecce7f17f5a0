#!/usr/bin/env node
// The installed entry (`vgpu-warden`, and `kubectl-vgpu_warden` for `kubectl vgpu-warden ...`).
// It checks the Node.js version before anything heavy loads: main.js imports the Kubernetes client,
// whose HTTP stack crashes at import on an old Node with a message that names neither. So the only
// static import is the dependency-free check, and main.js is loaded dynamically once it passes.
import { nodeVersionProblem } from './base/node-version.js';

const problem = nodeVersionProblem(process.versions.node);
if (problem === undefined) {
  await import('./main.js');
} else {
  process.stderr.write(`${problem}\n`);
  process.exitCode = 1;
}
