import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import { ShutdownHooks } from '../../../src/local/shutdown-hooks.js';

class FakeProcess extends EventEmitter {
  readonly exits: number[] = [];
  exitCalled: Promise<number>;
  private resolveExit: (code: number) => void = () => undefined;
  constructor() {
    super();
    this.exitCalled = new Promise((resolve) => {
      this.resolveExit = resolve;
    });
  }
  exit(code: number): never {
    this.exits.push(code);
    this.resolveExit(code);
    return undefined as never;
  }
}

function resource(log: string[], name = 'r', stopDelayMs = 0) {
  return {
    name,
    stop: async () => {
      await new Promise((resolve) => setTimeout(resolve, stopDelayMs));
      log.push(`stop ${name}`);
    },
    killSync: () => {
      log.push(`kill ${name}`);
    },
  };
}

describe('ShutdownHooks', () => {
  it('stops every resource on SIGINT, then exits 130', async () => {
    const target = new FakeProcess();
    const log: string[] = [];
    const hooks = new ShutdownHooks(target);
    hooks.register(resource(log, 'a', 20));
    hooks.register(resource(log, 'b'));
    target.emit('SIGINT', 'SIGINT');
    expect(await target.exitCalled).to.equal(130);
    expect(log.sort()).to.deep.equal(['stop a', 'stop b']);
  });

  it('stops the newest first and waits for each before the next (vgpu-warden before the control plane it talks to)', async () => {
    const target = new FakeProcess();
    const log: string[] = [];
    const hooks = new ShutdownHooks(target);
    hooks.register(resource(log, 'control plane'));
    hooks.register(resource(log, 'vgpu-warden', 30));
    hooks.register({ name: 'failing', stop: () => Promise.reject(new Error('boom')), killSync: () => undefined });
    target.emit('SIGINT', 'SIGINT');
    expect(await target.exitCalled).to.equal(130);
    expect(log, 'a failing stop does not keep the others from stopping').to.deep.equal([
      'stop vgpu-warden',
      'stop control plane',
    ]);
  });

  it('stopAll(): stops every resource newest first without exiting, then forgets them and the signals', async () => {
    const target = new FakeProcess();
    const log: string[] = [];
    const hooks = new ShutdownHooks(target);
    hooks.register(resource(log, 'control plane'));
    hooks.register({ name: 'failing', stop: () => Promise.reject(new Error('boom')), killSync: () => undefined });
    hooks.register(resource(log, 'vgpu-warden', 20));
    await hooks.stopAll();
    expect(log).to.deep.equal(['stop vgpu-warden', 'stop control plane']);
    expect(target.exits, 'the process goes on').to.deep.equal([]);
    expect(
      target.listenerCount('SIGINT') + target.listenerCount('SIGTERM') + target.listenerCount('exit'),
      'nothing left to stop on a signal',
    ).to.equal(0);
    await hooks.stopAll();
    expect(log, 'a second call stops nothing again').to.have.length(2);
  });

  it('stopAll() gives up on a stop that hangs after the bound', async () => {
    const hooks = new ShutdownHooks(new FakeProcess(), 30);
    hooks.register({ name: 'hangs', stop: () => new Promise<void>(() => undefined), killSync: () => undefined });
    const started = Date.now();
    await hooks.stopAll();
    expect(Date.now() - started).to.be.lessThan(1000);
  });

  it('exits 143 on SIGTERM', async () => {
    const target = new FakeProcess();
    new ShutdownHooks(target).register(resource([]));
    target.emit('SIGTERM', 'SIGTERM');
    expect(await target.exitCalled).to.equal(143);
  });

  it('kills synchronously on exit', () => {
    const target = new FakeProcess();
    const log: string[] = [];
    new ShutdownHooks(target).register(resource(log, 'a'));
    target.emit('exit');
    expect(log).to.deep.equal(['kill a']);
  });

  it('does not wait forever for a stop that hangs', async () => {
    const target = new FakeProcess();
    const hooks = new ShutdownHooks(target, 50);
    hooks.register({ name: 'hang', stop: () => new Promise(() => undefined), killSync: () => undefined });
    target.emit('SIGINT', 'SIGINT');
    expect(await target.exitCalled).to.equal(130);
  });

  it('removes its listeners once nothing is registered', () => {
    const target = new FakeProcess();
    const unregister = new ShutdownHooks(target).register(resource([]));
    expect(target.listenerCount('SIGINT')).to.equal(1);
    unregister();
    expect(target.listenerCount('SIGINT')).to.equal(0);
    expect(target.listenerCount('exit')).to.equal(0);
  });
});
