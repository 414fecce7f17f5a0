import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadAllYaml, loadYaml, type KubernetesObject } from '@kubernetes/client-node';
import type { JsonPatchOp } from '../../src/admission/json-patch.js';
import { applyJsonPatch } from './apply-json-patch.js';

interface PatchTarget {
  kind?: string;
  name?: string;
  labelSelector?: string;
  [field: string]: unknown;
}

interface ComponentFile {
  apiVersion?: string;
  kind?: string;
  patches?: { target?: PatchTarget; patch?: string; [field: string]: unknown }[];
  [field: string]: unknown;
}

type AnyObject = KubernetesObject & Record<string, unknown>;

/** `a=b,c=d` as a map; anything but equality terms is not used by our components and fails. */
function parseSelector(selector: string): Record<string, string> {
  return Object.fromEntries(
    selector.split(',').map((term) => {
      const match = /^\s*([^=!\s]+)\s*==?\s*([^=!\s]*)\s*$/.exec(term);
      if (!match) throw new Error(`unsupported label selector term ${JSON.stringify(term)}`);
      return [match[1]!, match[2]!];
    }),
  );
}

function targets(object: AnyObject, target: PatchTarget): boolean {
  if (target.kind !== undefined && object.kind !== target.kind) return false;
  if (target.name !== undefined && object.metadata?.name !== target.name) return false;
  const labels = object.metadata?.labels ?? {};
  return Object.entries(parseSelector(target.labelSelector ?? '')).every(([key, value]) => labels[key] === value);
}

/**
 * What `kustomize build` makes of a base plus one Component of manifests/components, for the
 * subset the components use: inline JSON6902 patches (add, replace) on targets chosen by kind,
 * name and equality label selectors. Anything else in the component fails loudly, so the tests
 * never render a component differently from kustomize without noticing. Returns patched copies
 * and, per patch, how many objects it changed.
 */
export function applyComponent<T extends KubernetesObject>(
  objects: readonly T[],
  componentDir: string,
): { objects: T[]; matched: number[] } {
  const component = loadYaml<ComponentFile>(readFileSync(resolve(componentDir, 'kustomization.yaml'), 'utf8'));
  if (component.apiVersion !== 'kustomize.config.k8s.io/v1alpha1' || component.kind !== 'Component') {
    throw new Error(`${componentDir} is not a kustomize Component`);
  }
  const unsupported = Object.keys(component).filter((key) => !['apiVersion', 'kind', 'patches'].includes(key));
  if (unsupported.length > 0) throw new Error(`${componentDir}: unsupported fields ${unsupported.join(', ')}`);
  let result = objects.map((object) => structuredClone(object) as unknown as AnyObject);
  const matched: number[] = [];
  for (const entry of component.patches ?? []) {
    const extra = Object.keys(entry).filter((key) => !['target', 'patch'].includes(key));
    const targetExtra = Object.keys(entry.target ?? {}).filter(
      (key) => !['kind', 'name', 'labelSelector'].includes(key),
    );
    if (extra.length > 0 || targetExtra.length > 0 || entry.target === undefined || entry.patch === undefined) {
      throw new Error(
        `${componentDir}: only inline JSON6902 patches with a kind/name/labelSelector target are rendered`,
      );
    }
    const parsed: unknown = loadAllYaml(entry.patch)[0];
    const ops = Array.isArray(parsed) ? (parsed as { op?: unknown }[]) : [];
    if (ops.length === 0 || ops.some((op) => op.op !== 'add' && op.op !== 'replace'))
      throw new Error(`${componentDir}: only add and replace operations are rendered`);
    let count = 0;
    const target = entry.target;
    result = result.map((object) => {
      if (!targets(object, target)) return object;
      count += 1;
      return applyJsonPatch(object, ops as JsonPatchOp[]);
    });
    matched.push(count);
  }
  return { objects: result as unknown as T[], matched };
}
