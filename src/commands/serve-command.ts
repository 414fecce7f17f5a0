import { startServer, type RunningServer } from '../serve/start-server.js';
import { configFlags, contextFlag, contextOf, EXIT_FAILURE, EXIT_OK, type Command } from './cli.js';
import { ConfigError } from '../config/setting-spec.js';
import { createLogger } from '../telemetry/logger.js';
import { GRACEFUL_SHUTDOWN_MS, StartAborted, StartupError } from '../lifecycle/lifecycle.js';
import { failureText } from '../telemetry/api-failure.js';
import { untilAborted } from '../base/abort.js';

/**
 * Once `serve` has returned its exit code, the process should end as soon as the event loop is
 * empty; if something still holds it this long after (a connection that would not close), it is
 * ended anyway, so a stop never waits for more than GRACEFUL_SHUTDOWN_MS plus this.
 */
const FORCE_EXIT_AFTER_MS = 2_000;

export interface ServeDeps {
  /** Resolves when the process is asked to stop (SIGTERM/SIGINT in main); listening starts on call. */
  waitForStopSignal: () => Promise<string>;
  /**
   * Ends the process with this exit code (main passes process.exit). Called only if the process is
   * still alive FORCE_EXIT_AFTER_MS after `serve` returned; without it, a leftover handle could
   * keep a stopped server's process running.
   */
  forceExit?: (code: number) => void;
  /** The package version (main reads it once), for vgpu_warden_build_info. */
  version?: string;
}

/** The one line a start-up failure is reported with (the JSON log may not be where the operator looks). */
function startFailureLine(error: unknown): string {
  return `vgpu-warden: ${error instanceof StartupError ? error.message : `cannot start: ${failureText(error)}`}`;
}

/**
 * `vgpu-warden serve`: the admission webhook, the scheduler
 * extender, the pod watch and the leader-elected lock sweeper.
 */
export function serveCommand(deps: ServeDeps): Command {
  return {
    name: 'serve',
    summary: 'run the admission webhook, the scheduler extender, the pod watch and the leader-elected lock sweeper',
    usesConfig: true,
    flags: { ...configFlags(), context: contextFlag() },
    run: async ({ io, flags, config }) => {
      const settings = config();
      const log = createLogger(settings.logLevel);
      const stopAsked = new AbortController();
      let signal: string | undefined;
      // Listening starts now, so a SIGTERM during start-up is not lost: it aborts the start.
      void deps.waitForStopSignal().then((name) => {
        signal = name;
        stopAsked.abort(new StartAborted(`${name} received`));
      });
      const done = (code: number): number => {
        if (deps.forceExit !== undefined) {
          const forceExit = deps.forceExit;
          setTimeout(() => {
            forceExit(code);
          }, FORCE_EXIT_AFTER_MS).unref();
        }
        return code;
      };
      let server: RunningServer;
      try {
        const kubeContext = contextOf(flags);
        server = await startServer(settings, log, {
          signal: stopAsked.signal,
          ...(deps.version === undefined ? {} : { version: deps.version }),
          ...(kubeContext === undefined ? {} : { kubeContext }),
        });
      } catch (error) {
        if (error instanceof StartAborted) {
          log.info({ signal }, 'stopped during start-up');
          return done(EXIT_OK);
        }
        if (error instanceof ConfigError) throw error;
        io.stderr(startFailureLine(error));
        return done(EXIT_FAILURE);
      }
      await untilAborted(stopAsked.signal);
      log.info({ signal }, 'stopping');
      const report = await server.stop();
      if (report.timedOut) {
        log.warn(
          { unfinished: report.unfinished },
          `stopped with parts still stopping after ${GRACEFUL_SHUTDOWN_MS / 1000} s`,
        );
        return done(EXIT_FAILURE);
      }
      log.info({ signal }, 'stopped');
      return done(EXIT_OK);
    },
  };
}
