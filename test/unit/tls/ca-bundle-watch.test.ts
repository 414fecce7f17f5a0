import { expect } from 'chai';
import type { ListResult, ListWatchSource, WatchEventType, WatchHandlers } from '../../../src/cluster/reflector.js';
import { caBundleFieldOf, type WebhookConfigurationView } from '../../../src/tls/ca-bundle-drift.js';
import { CaBundleWatch, CaBundleWatchError, type CaBundleWatchDeps } from '../../../src/tls/ca-bundle-watch.js';
import { until } from '../../support/eventually.js';

const NAME = 'vgpu-warden';
const OURS = '-----BEGIN CERTIFICATE-----\nours\n-----END CERTIFICATE-----\n';

function configuration(
  resourceVersion: string,
  bundles: (string | undefined)[],
  name = NAME,
): WebhookConfigurationView {
  return {
    metadata: { name, resourceVersion },
    webhooks: bundles.map((pem, index) => ({
      name: `hook-${index}`,
      clientConfig: pem === undefined ? {} : { caBundle: caBundleFieldOf(pem) },
    })),
  };
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/** One LIST with the given items, then one WATCH the test feeds events into; later calls hang. */
class PushSource implements ListWatchSource<WebhookConfigurationView> {
  private handlers: WatchHandlers<WebhookConfigurationView> | undefined;
  private listed = false;

  constructor(private readonly items: WebhookConfigurationView[]) {}

  list(): Promise<ListResult<WebhookConfigurationView>> {
    if (this.listed) return new Promise(() => undefined);
    this.listed = true;
    return Promise.resolve({ items: this.items, resourceVersion: '1' });
  }

  watch(_from: string, handlers: WatchHandlers<WebhookConfigurationView>, signal: AbortSignal): Promise<void> {
    this.handlers = handlers;
    return new Promise((_resolve, reject) => {
      signal.addEventListener(
        'abort',
        () => {
          reject(new Error('aborted'));
        },
        { once: true },
      );
    });
  }

  get watching(): boolean {
    return this.handlers !== undefined;
  }

  push(type: WatchEventType, object: WebhookConfigurationView): void {
    if (this.handlers === undefined) throw new Error('no watch open');
    this.handlers.onEvent(type, object);
  }
}

interface Harness {
  watch: CaBundleWatch;
  source: PushSource;
  heals: number[];
  pauses: number[];
  logs: string[];
  now: { ms: number };
}

function harness(items: WebhookConfigurationView[], overrides: Partial<CaBundleWatchDeps> = {}): Harness {
  const source = new PushSource(items);
  const heals: number[] = [];
  const pauses: number[] = [];
  const logs: string[] = [];
  const now = { ms: 1_000_000 };
  const watch = new CaBundleWatch({
    configurationName: NAME,
    source,
    wanted: () => OURS,
    heal: () => {
      heals.push(now.ms);
      return Promise.resolve();
    },
    clock: () => now.ms,
    random: () => 0,
    sleep: (ms) => {
      pauses.push(ms);
      now.ms += ms;
      return Promise.resolve();
    },
    log: (level, message) => {
      logs.push(`${level}: ${message}`);
    },
    ...overrides,
  });
  return { watch, source, heals, pauses, logs, now };
}

describe('CaBundleWatch', () => {
  it('refuses settings that cannot work', () => {
    expect(() => harness([], { attempts: 0 })).to.throw(CaBundleWatchError, /attempts/);
    expect(() => harness([], { initialBackoffMs: 100, maxBackoffMs: 10 })).to.throw(CaBundleWatchError, /maxBackoffMs/);
  });

  it('heals at once when the listed configuration lacks our caBundle, and leaves a healthy one alone', async () => {
    const { watch, source, heals } = harness([configuration('5', [undefined, OURS])]);
    watch.start();
    await until('the watch', () => source.watching);
    await watch.settled();
    expect(heals).to.have.length(1);
    source.push('MODIFIED', configuration('6', [OURS, OURS]));
    await watch.settled();
    expect(heals).to.have.length(1);
    await watch.stop();
  });

  it('heals a reset seen on the watch, once per configuration version', async () => {
    const { watch, source, heals, logs } = harness([configuration('5', [OURS, OURS])]);
    watch.start();
    await until('the watch', () => source.watching);
    await watch.settled();
    expect(heals).to.deep.equal([]);
    source.push('MODIFIED', configuration('7', [OURS, '']));
    await watch.settled();
    expect(heals).to.have.length(1);
    expect(logs.some((line) => line.startsWith('warn: ') && line.includes('not ours on hook-1'))).to.be.true;
    // The same version again (a relist) is not healed twice.
    source.push('MODIFIED', configuration('7', [OURS, '']));
    await watch.settled();
    expect(heals).to.have.length(1);
    await watch.stop();
  });

  it('heals a configuration re-created after a delete, and ignores other names', async () => {
    const { watch, source, heals } = harness([]);
    watch.start();
    await until('the watch', () => source.watching);
    source.push('ADDED', configuration('3', [OURS], 'someone-else'));
    await watch.settled();
    expect(heals).to.deep.equal([]);
    source.push('DELETED', configuration('4', [OURS]));
    await watch.settled();
    expect(heals).to.deep.equal([]);
    source.push('ADDED', configuration('9', [undefined]));
    await watch.settled();
    expect(heals).to.have.length(1);
    await watch.stop();
  });

  it('does nothing while no caBundle is served yet', async () => {
    const served: { pem?: string } = {};
    const { watch, source, heals } = harness([configuration('5', [undefined])], { wanted: () => served.pem });
    watch.start();
    await until('the watch', () => source.watching);
    await watch.settled();
    expect(heals).to.deep.equal([]);
    served.pem = OURS;
    source.push('MODIFIED', configuration('6', [undefined]));
    await watch.settled();
    expect(heals).to.have.length(1);
    await watch.stop();
  });

  it('retries a failing heal with growing pauses, then gives up with an error line until the next change', async () => {
    let calls = 0;
    const failing = harness([configuration('5', [''])], {
      attempts: 4,
      initialBackoffMs: 100,
      maxBackoffMs: 350,
      heal: () => {
        calls++;
        return Promise.reject(new Error('HTTP 503'));
      },
    });
    failing.watch.start();
    await until('the watch', () => failing.source.watching);
    await failing.watch.settled();
    expect(calls).to.equal(4);
    // 100, 200, 400 capped at 350 (random() = 0: no jitter).
    expect(failing.pauses).to.deep.equal([100, 200, 350]);
    expect(failing.logs.filter((line) => line.startsWith('error: '))).to.have.length(1);
    expect(failing.logs.find((line) => line.startsWith('error: ')))
      .to.include('after 4 attempts')
      .and.include('HTTP 503');
    // Not marked healed: the next change of the same drift is tried again.
    failing.source.push('MODIFIED', configuration('6', ['']));
    await failing.watch.settled();
    expect(calls).to.equal(8);
    await failing.watch.stop();
  });

  it('succeeds on a later attempt without an error line', async () => {
    let calls = 0;
    const { watch, source, logs, pauses } = harness([configuration('5', [''])], {
      heal: () => {
        calls++;
        return calls < 3 ? Promise.reject(new Error('conflict')) : Promise.resolve();
      },
    });
    watch.start();
    await until('the watch', () => source.watching);
    await watch.settled();
    expect(calls).to.equal(3);
    expect(pauses).to.deep.equal([250, 500]);
    expect(watch.heals).to.equal(1);
    expect(logs.filter((line) => line.startsWith('error: '))).to.deep.equal([]);
    await watch.stop();
  });

  it('backs off when another writer keeps resetting the field, and stops backing off once it is quiet', async () => {
    const { watch, source, heals, pauses, logs, now } = harness([configuration('1', [OURS])], {
      initialBackoffMs: 1000,
      maxBackoffMs: 4000,
      fightWindowMs: 10_000,
    });
    watch.start();
    await until('the watch', () => source.watching);
    const reset = async (version: number) => {
      source.push('MODIFIED', configuration(String(version), ['']));
      await watch.settled();
      source.push('MODIFIED', configuration(String(version + 1), [OURS]));
      await watch.settled();
    };
    await reset(10);
    expect(pauses).to.deep.equal([]);
    now.ms += 100;
    await reset(20);
    now.ms += 100;
    await reset(30);
    now.ms += 100;
    await reset(40);
    expect(heals).to.have.length(4);
    expect(pauses).to.deep.equal([1000, 2000, 4000]);
    expect(logs.filter((line) => line.includes('another writer keeps changing it'))).to.have.length(3);
    // A quiet fight window, then a single reset is healed at once again.
    now.ms += 10_000;
    source.push('MODIFIED', configuration('50', [OURS]));
    await watch.settled();
    now.ms += 10_000;
    await reset(60);
    expect(pauses).to.deep.equal([1000, 2000, 4000]);
    expect(heals).to.have.length(5);
    await watch.stop();
  });

  it('stops promptly in the middle of a backoff', async () => {
    let release: () => void = () => undefined;
    const { watch, source } = harness([configuration('5', [''])], {
      heal: () => Promise.reject(new Error('down')),
      sleep: (_ms, signal) =>
        new Promise<void>((resolve, reject) => {
          release = resolve;
          signal.addEventListener(
            'abort',
            () => {
              reject(new Error('aborted'));
            },
            { once: true },
          );
        }),
    });
    watch.start();
    await until('the watch', () => source.watching);
    await tick();
    const stopped = watch.stop();
    await stopped;
    release();
  });
});
