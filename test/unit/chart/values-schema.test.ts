import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadYaml } from '@kubernetes/client-node';
import { expect } from 'chai';

/**
 * charts/vgpu-warden/values.schema.json against the chart's values files, without helm (the chart
 * test renders it with helm: test/integration/helm-chart.test.ts). Each key of values.yaml and of
 * values-hami-migration.yaml is declared at its place, and every object level the schema declares
 * refuses keys it does not name, so a misspelt value fails `helm template` instead of being ignored.
 */
const chart = resolve(import.meta.dirname, '..', '..', '..', 'charts', 'vgpu-warden');

interface Schema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  items?: Schema;
  required?: string[];
  enum?: unknown[];
  definitions?: Record<string, Schema>;
  [key: string]: unknown;
}

const schema = JSON.parse(readFileSync(resolve(chart, 'values.schema.json'), 'utf8')) as Schema;
const values = (file: string) => loadYaml<Record<string, unknown>>(readFileSync(resolve(chart, file), 'utf8'));

function resolveRef(node: Schema): Schema {
  if (node.$ref === undefined) return node;
  const name = /^#\/definitions\/(.+)$/.exec(node.$ref)?.[1];
  const target = name === undefined ? undefined : schema.definitions?.[name];
  if (target === undefined) throw new Error(`unresolved $ref ${node.$ref}`);
  return resolveRef(target);
}

const typesOf = (node: Schema): string[] =>
  node.type === undefined ? [] : Array.isArray(node.type) ? node.type : [node.type];
const typeOfValue = (value: unknown): string =>
  value === null ? 'null' : Array.isArray(value) ? 'array' : Number.isInteger(value) ? 'integer' : typeof value;

/** Where a value does not fit the schema: unknown keys, missing required keys, wrong types, values outside an enum. */
function problems(value: unknown, node: Schema, path: string): string[] {
  const resolved = resolveRef(node);
  const types = typesOf(resolved);
  const actual = typeOfValue(value);
  if (types.length > 0 && !types.includes(actual) && !(actual === 'integer' && types.includes('number')))
    return [`${path}: ${actual}, schema says ${types.join('|')}`];
  if (resolved.enum !== undefined && !resolved.enum.includes(value))
    return [`${path}: ${JSON.stringify(value)} is not one of ${JSON.stringify(resolved.enum)}`];
  const found: string[] = [];
  if (actual === 'object') {
    const object = value as Record<string, unknown>;
    for (const key of resolved.required ?? []) if (!(key in object)) found.push(`${path}.${key}: required`);
    for (const [key, entry] of Object.entries(object)) {
      const declared = resolved.properties?.[key];
      if (declared !== undefined) found.push(...problems(entry, declared, `${path}.${key}`));
      else if (resolved.additionalProperties === false) found.push(`${path}.${key}: not in the schema`);
      else if (typeof resolved.additionalProperties === 'object')
        found.push(...problems(entry, resolved.additionalProperties, `${path}.${key}`));
    }
  }
  if (actual === 'array' && resolved.items !== undefined) {
    for (const [index, entry] of (value as unknown[]).entries())
      found.push(...problems(entry, resolved.items, `${path}[${index}]`));
  }
  return found;
}

/** Every schema node that declares properties, with its path. */
function objectLevels(node: Schema, path: string, seen = new Set<Schema>()): [string, Schema][] {
  if (seen.has(node)) return [];
  seen.add(node);
  const levels: [string, Schema][] = node.properties === undefined ? [] : [[path, node]];
  for (const [key, child] of Object.entries(node.properties ?? {}))
    levels.push(...objectLevels(child, `${path}.${key}`, seen));
  if (node.items !== undefined) levels.push(...objectLevels(node.items, `${path}[]`, seen));
  if (typeof node.additionalProperties === 'object')
    levels.push(...objectLevels(node.additionalProperties, `${path}.*`, seen));
  for (const [name, definition] of Object.entries(node.definitions ?? {}))
    levels.push(...objectLevels(definition, `#/definitions/${name}`, seen));
  return levels;
}

describe('charts/vgpu-warden/values.schema.json', () => {
  it('declares every key of values.yaml with its type', () => {
    expect(problems(values('values.yaml'), schema, 'values')).to.deep.equal([]);
  });

  it('accepts the HAMi migration values', () => {
    expect(problems(values('values-hami-migration.yaml'), schema, 'values')).to.deep.equal([]);
  });

  it('refuses unknown keys at every object level it declares', () => {
    const open = objectLevels(schema, 'values')
      .filter(([, node]) => node.additionalProperties !== false)
      .map(([path]) => path);
    expect(open).to.deep.equal([]);
  });

  it('declares every key values.yaml has, and no key values.yaml lacks (so the schema and the defaults move together)', () => {
    const declared = Object.keys(schema.properties ?? {})
      .filter((key) => key !== 'global')
      .sort();
    expect(declared).to.deep.equal(Object.keys(values('values.yaml')).sort());
  });

  it('finds the misspelling the issue names, and wrong types, in this walk too', () => {
    expect(problems({ ...values('values.yaml'), locks: { expiry: '5m' } }, schema, 'values')).to.deep.equal([
      'values.locks.expiry: not in the schema',
    ]);
    expect(problems({ ...values('values.yaml'), replicas: 'two' }, schema, 'values')).to.deep.equal([
      'values.replicas: string, schema says integer',
    ]);
  });
});
