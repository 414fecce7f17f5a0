import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';

// A static import or export-from that stays at runtime: `import type` and `export type` vanish.
const STATIC = /^\s*(?:import|export)\s+(?!type\b)(?:[^'";]*?\sfrom\s*)?['"](\.{1,2}\/[^'"]+)['"]/gm;

/**
 * The modules of `root` that Node loads when it starts `entry` (relative to root), before any
 * dynamic import(): the closure of static, non-type relative imports, read from the source text.
 */
export function startupModules(root: string, entry: string): string[] {
  const seen = new Set<string>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop() ?? '';
    if (seen.has(file)) continue;
    seen.add(file);
    const text = readFileSync(resolve(root, file), 'utf8');
    for (const match of text.matchAll(STATIC)) {
      queue.push(relative(root, resolve(dirname(resolve(root, file)), (match[1] ?? '').replace(/\.js$/, '.ts'))));
    }
  }
  return [...seen].sort();
}
