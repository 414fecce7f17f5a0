import { expect } from 'chai';
import { decodeAllocation, encodeAllocation, isDecodeError } from '../../src/devices/allocation-codec.js';
import { parseNodeInventory, type GpuDevice } from '../../src/devices/inventory.js';
import { parseLockValue } from '../../src/lock/lock-value.js';
import { fuzz, fuzzSeed, type Fuzz } from '../support/fuzz.js';
import { LOCK_ALPHABET, validLockValue } from '../support/lock-fuzz.js';
import { NODE_REGISTER_ANNOTATION } from '../../src/hami/wire.js';

/**
 * Property tests for the three codecs that read what others wrote on nodes and pods: random code
 * units and seeded mutations of valid values (FUZZ_SEED=<n> reproduces a run). Each decoder must
 * never throw, and must decode exactly what an independent statement of its grammar (written
 * here, from the wire contract and Go's rules, not from src/) accepts: nothing outside it.
 */
const seed = fuzzSeed(20261213);
const ROUNDS = 3000;

function inputs(f: Fuzz, valid: () => string, alphabet: string): string[] {
  return Array.from({ length: ROUNDS }, (_, round) => {
    if (round % 10 === 0) return valid();
    if (round % 3 === 0) return f.bytes(120);
    return f.mutate(valid(), alphabet);
  });
}

/** Runs `check` on every input and reports the failures with the inputs that caused them. */
function holds(what: string, cases: readonly string[], check: (input: string) => string | undefined): void {
  const failures: string[] = [];
  for (const input of cases) {
    let problem: string | undefined;
    try {
      problem = check(input);
    } catch (error) {
      problem = `threw ${String(error)}`;
    }
    if (problem !== undefined)
      failures.push(`${JSON.stringify(input.length > 200 ? `${input.slice(0, 200)}…` : input)}: ${problem}`);
  }
  expect(failures, `${what} (seed ${seed}):\n${failures.slice(0, 10).join('\n')}`).to.deep.equal([]);
}

// --- node lock: Go's time.Parse(time.RFC3339) grammar, and pod-name rules -----------------------

const TIME =
  /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{1,2}):([0-9]{2}):([0-9]{2})(?:[.,][0-9]+)?(?:Z|[+-]([0-9]{2}):([0-9]{2}))$/;

function isGoRfc3339(text: string): boolean {
  const match = TIME.exec(text);
  if (!match) return false;
  const field = (group: number): number => Number(match[group] ?? 0);
  // Leap years repeat every 400 years: ask the Date of the same year in that cycle.
  const leap = new Date(Date.UTC(2000 + (field(1) % 400), 1, 29)).getUTCMonth() === 1;
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][field(2) - 1];
  return (
    days !== undefined &&
    field(3) >= 1 &&
    field(3) <= days &&
    field(4) <= 23 &&
    field(5) <= 59 &&
    field(6) <= 59 &&
    field(7) <= 24 &&
    field(8) <= 60
  );
}

const isNamespace = (text: string): boolean =>
  text.length >= 1 && text.length <= 63 && /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$/.test(text);
const isPodName = (text: string): boolean =>
  text.length >= 1 &&
  text.length <= 253 &&
  text.split('.').every((label) => /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$/.test(label));

/** What the grammar makes of a lock value: legacy, owned (with its owner) or nothing. */
function lockGrammar(raw: string): { kind: 'legacy' } | { kind: 'owned'; namespace: string; name: string } | undefined {
  const parts = raw.split(',');
  if (parts.length === 1) return isGoRfc3339(raw) ? { kind: 'legacy' } : undefined;
  const [time = '', namespace = '', name = ''] = parts;
  return parts.length === 3 && isGoRfc3339(time) && isNamespace(namespace) && isPodName(name)
    ? { kind: 'owned', namespace, name }
    : undefined;
}

// --- allocation annotation: HAMi's NVIDIA wire form ---------------------------------------------

const DEVICE = /([\x21-\x2b\x2d-\x39\x3c-\x7e]+),NVIDIA,([+-]?[0-9]+),([+-]?[0-9]+):/g;
const ALLOCATION = /^(?:(?:[\x21-\x2b\x2d-\x39\x3c-\x7e]+,NVIDIA,[+-]?[0-9]+,[+-]?[0-9]+:)*;)*$/;

function inAllocationGrammar(text: string): boolean {
  if (!ALLOCATION.test(text)) return false;
  return [...text.matchAll(DEVICE)].every(
    ([, , memory = '', cores = '']) =>
      Number(memory) >= 1 && Number(memory) <= 2 ** 31 - 1 && Number(cores) >= 0 && Number(cores) <= 100,
  );
}

/** The value with its numbers in canonical form: what encoding a correct decode gives back. */
const canonical = (text: string): string =>
  text.replace(
    DEVICE,
    (_, uuid: string, memory: string, cores: string) => `${uuid},NVIDIA,${Number(memory) + 0},${Number(cores) + 0}:`,
  );

function validAllocation(f: Fuzz): string {
  return Array.from(
    { length: f.int(4) },
    () =>
      Array.from(
        { length: f.pick([0, 0, 1, 2]) },
        () =>
          `GPU-${f.int(0xffff).toString(16)},NVIDIA,${f.pick([1, 2 ** 31 - 1, 1 + f.int(81_920)])},${f.pick([0, 100, f.int(100)])}:`,
      ).join('') + ';',
  ).join('');
}

// --- node inventory: HAMi's device-plugin registration ------------------------------------------

const DEVICE_ID = /^[\x21-\x2b\x2d-\x39\x3c-\x7e]+$/;
const INT32_MAX = 2 ** 31 - 1;
const isInt = (value: unknown, min: number): boolean =>
  typeof value === 'number' && Number.isInteger(value) && value >= min && value <= INT32_MAX;
const GO_BOOL = new Map([
  ...['1', 't', 'T', 'TRUE', 'true', 'True'].map((word) => [word, true] as const),
  ...['0', 'f', 'F', 'FALSE', 'false', 'False'].map((word) => [word, false] as const),
]);

/** The devices the grammar reads from one registration value (entries outside it are dropped). */
function inventoryGrammar(raw: string): Omit<GpuDevice, 'cordoned'>[] {
  const text = raw.trim();
  if (text.startsWith('[')) {
    let entries: unknown;
    try {
      entries = JSON.parse(text);
    } catch {
      return [];
    }
    if (!Array.isArray(entries)) return [];
    return entries.flatMap((entry: unknown) => {
      if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return [];
      const field = (key: string, fallback: unknown): unknown => (entry as Record<string, unknown>)[key] ?? fallback;
      const [id, index, count, devmem, devcore, numa, type, mode, health] = [
        field('id', undefined),
        field('index', 0),
        field('count', 0),
        field('devmem', 0),
        field('devcore', 0),
        field('numa', 0),
        field('type', ''),
        field('mode', ''),
        field('health', false),
      ];
      if (
        typeof id !== 'string' ||
        !DEVICE_ID.test(id) ||
        typeof type !== 'string' ||
        typeof mode !== 'string' ||
        typeof health !== 'boolean'
      )
        return [];
      if (![index, count, devmem, devcore].every((value) => isInt(value, 0)) || !isInt(numa, -1)) return [];
      return [
        { uuid: id, index, count, memoryMiB: devmem, cores: devcore, type, numa, mode, healthy: health } as Omit<
          GpuDevice,
          'cordoned'
        >,
      ];
    });
  }
  if (!text.includes(':')) return [];
  return text.split(':').flatMap((piece) => {
    const fields = piece.split(',');
    if (fields.length !== 7 && fields.length !== 9) return [];
    const [uuid = '', count, memory, cores, type = '', numa, health = '', index = '0', mode = 'hami-core'] = fields;
    const integer = (value: string | undefined, min: number): number | undefined =>
      /^[+-]?[0-9]+$/.test(value ?? '') && isInt(Number(value) + 0, min) ? Number(value) + 0 : undefined;
    const numbers = [integer(count, 0), integer(memory, 0), integer(cores, 0), integer(numa, -1), integer(index, 0)];
    const healthy = GO_BOOL.get(health);
    if (!DEVICE_ID.test(uuid) || numbers.includes(undefined) || healthy === undefined) return [];
    const [c, m, k, n, i] = numbers as number[];
    return [
      { uuid, index: i, count: c, memoryMiB: m, cores: k, type, numa: n, mode, healthy } as Omit<GpuDevice, 'cordoned'>,
    ];
  });
}

function validInventory(f: Fuzz): string {
  const gpus = Array.from({ length: 1 + f.int(3) }, (_, index) => ({
    id: `GPU-${index}-${f.int(999)}`,
    index,
    count: 10,
    devmem: 1 + f.int(81_920),
    devcore: 100,
    type: 'NVIDIA-A10',
    numa: f.int(1),
    mode: 'hami-core',
    health: f.random() < 0.8,
  }));
  if (f.random() < 0.6) return JSON.stringify(gpus);
  return gpus
    .map(
      (gpu) =>
        `${gpu.id},${gpu.count},${gpu.devmem},${gpu.devcore},${gpu.type},${gpu.numa},${String(gpu.health)}${f.random() < 0.5 ? `,${gpu.index},${gpu.mode}` : ''}:`,
    )
    .join('');
}

describe(`codec properties (seed ${seed}, ${ROUNDS} inputs each)`, () => {
  it('node lock: never throws, and reads a value as legacy or owned exactly when the grammar does', () => {
    const f = fuzz(seed);
    holds(
      'lock codec',
      inputs(f, () => validLockValue(f), LOCK_ALPHABET),
      (raw) => {
        const value = parseLockValue(raw);
        const expected = lockGrammar(raw);
        if (value.kind === 'malformed') {
          if (expected !== undefined)
            return `malformed (${value.problem}) but the grammar reads it as ${expected.kind}`;
          return value.problem.length > 400 ? 'a problem text longer than 400 characters' : undefined;
        }
        if (expected?.kind !== value.kind) return `decoded as ${value.kind}, which the grammar refuses`;
        if (
          value.kind === 'owned' &&
          expected.kind === 'owned' &&
          (value.owner.namespace !== expected.namespace || value.owner.name !== expected.name)
        )
          return 'wrong owner';
        return Number.isNaN(value.time.getTime()) ? 'an invalid Date' : undefined;
      },
    );
  });

  it("allocation annotation (strict reading): never throws, decodes exactly the grammar's values, and encodes them back", () => {
    const f = fuzz(seed + 1);
    holds(
      'allocation codec',
      inputs(f, () => validAllocation(f), 'GPU-ab,;:NVIDIAnvidia0123456789+- '),
      (text) => {
        // The grammar is what our encoder writes: the strict reading (the HAMi reading is tested in devices/).
        const decoded = decodeAllocation(text, 'strict');
        const inGrammar = inAllocationGrammar(text);
        if (isDecodeError(decoded)) {
          if (inGrammar) return `refused (${decoded.error}) but the grammar accepts it`;
          if (!decoded.error.startsWith(`container ${decoded.container}`))
            return `the error does not start by naming its container: ${decoded.error}`;
          return decoded.error.length > 300 ? 'an error text longer than 300 characters' : undefined;
        }
        if (!inGrammar) return 'decoded, but the grammar refuses it';
        return encodeAllocation(decoded) === canonical(text) ? undefined : `re-encodes as ${encodeAllocation(decoded)}`;
      },
    );
  });

  it('node inventory: never throws, and every device it reads is one the grammar reads, field for field', () => {
    const f = fuzz(seed + 2);
    holds(
      'inventory parser',
      inputs(f, () => validInventory(f), '[]{}":,0123456789abcdefGPU-truefalsenull:\\ '),
      (raw) => {
        const inventory = parseNodeInventory({ [NODE_REGISTER_ANNOTATION]: raw });
        if (!inventory.problems.every((problem) => typeof problem === 'string' && problem !== ''))
          return 'an empty problem';
        const readable = inventoryGrammar(raw);
        const uuids = inventory.devices.map((device) => device.uuid);
        if (new Set(uuids).size !== uuids.length) return 'a repeated uuid';
        for (const device of inventory.devices) {
          if (
            !readable.some(
              (candidate) => JSON.stringify({ ...candidate, cordoned: device.cordoned }) === JSON.stringify(device),
            )
          )
            return `read ${JSON.stringify(device)}, which the grammar does not`;
        }
        return undefined;
      },
    );
  });
});
