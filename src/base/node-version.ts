/**
 * The Node.js version check of the `vgpu-warden` bin. Imports nothing, so it runs on any Node that
 * can load an ES module: the point is to say plainly what is needed where the real entry would
 * crash at import (undici 8 needs Node >= 22.19: on Node 20 it fails with `Cannot read properties
 * of undefined (reading 'bind')`). Pure.
 */

/** The oldest Node.js the dependencies run on: undici 8's engines (see the test that keeps them in step). */
export const MINIMUM_NODE_VERSION = '22.19.0';

/** The version npm scripts, the tests and the container image run on (the `node@24` devDependency). */
export const TESTED_NODE_MAJOR = 24;

function parts(version: string): number[] | undefined {
  const match = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version.trim());
  return match === null ? undefined : match.slice(1, 4).map(Number);
}

/** Whether `found` is at least `minimum` (both `major.minor.patch`, a leading `v` allowed). */
export function isAtLeast(found: string, minimum: string): boolean {
  const have = parts(found);
  const need = parts(minimum);
  if (have === undefined || need === undefined) return false;
  for (let index = 0; index < 3; index++) {
    const difference = (have[index] ?? 0) - (need[index] ?? 0);
    if (difference !== 0) return difference > 0;
  }
  return true;
}

/** One line saying what is needed and how to get it, or undefined when `found` will do. */
export function nodeVersionProblem(found: string, minimum: string = MINIMUM_NODE_VERSION): string | undefined {
  if (isAtLeast(found, minimum)) return undefined;
  const shown = found.slice(0, 40);
  return (
    `vgpu-warden needs Node.js >= ${minimum} (found ${shown}): install Node.js ${TESTED_NODE_MAJOR}, ` +
    `or run it from the repository with npx vgpu-warden, which uses the pinned node@${TESTED_NODE_MAJOR}`
  );
}
