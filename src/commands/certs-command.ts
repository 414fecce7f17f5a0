import { configFlags, EXIT_OK, UsageError, type Command, type FlagSpec } from './cli.js';
import { CertKeeper } from '../tls/cert-keeper.js';
import { FileCertStore } from '../tls/file-cert-store.js';
import { servingNames } from '../tls/serving-names.js';
import { ServingNameError } from '../tls/tls-errors.js';

const DAY_MS = 86_400_000;

/** The CA lives ten serving lifetimes, as in `serve`, so leaf renewals far outnumber CA rotations. */
export const CA_VALIDITY_FACTOR = 10;

function configFlag(name: string): FlagSpec {
  const spec = configFlags()[name];
  if (spec === undefined) throw new Error(`unreachable: no setting with flag --${name}`);
  return spec;
}

function listFlag(value: string | boolean | string[] | undefined): string[] {
  if (Array.isArray(value)) return value;
  return typeof value === 'string' ? [value] : [];
}

/**
 * `vgpu-warden certs`: makes or renews the CA and serving certificate in the cert directory, the
 * same way `serve` does (it is the CertKeeper over a FileCertStore, with the same settings), and
 * prints one line per file written. A valid set for the same names is left alone unless --force.
 */
export function certsCommand(): Command {
  return {
    name: 'certs',
    summary: 'write a CA and serving certificate for local use into the cert directory',
    usesConfig: true,
    // Files only: no cluster, no listeners, so WEBHOOK_PORT or SWEEP_SCHEDULE cannot stop it.
    settings: ['servingCertificate'],
    flags: {
      'cert-dir': configFlag('cert-dir'),
      'service-name': configFlag('service-name'),
      namespace: configFlag('namespace'),
      host: {
        type: 'string',
        multiple: true,
        description: 'extra DNS name or IP address for the certificate, added to CERT_HOSTS',
      },
      'cert-validity': configFlag('cert-validity'),
      'cert-renew-before': configFlag('cert-renew-before'),
      force: {
        type: 'boolean',
        description:
          'make a new CA and serving certificate even if the current ones are valid (the old CA is kept as ' +
          'ca-previous.crt while it is valid)',
      },
    },
    run: async ({ io, flags, config }) => {
      const settings = config();
      let names: string[];
      try {
        names = servingNames({
          serviceName: settings.serviceName,
          namespace: settings.namespace,
          extraHosts: [...settings.certHosts, ...listFlag(flags.host)],
        });
      } catch (error) {
        if (error instanceof ServingNameError) throw new UsageError(error.message, { cause: error });
        throw error;
      }
      let written = 0;
      const store = new FileCertStore({
        dir: settings.certDir,
        onFileChange: ({ path, action }) => {
          written++;
          io.stdout(`${action === 'written' ? 'wrote' : 'removed'} ${path}`);
        },
      });
      const keeper = new CertKeeper({
        store,
        names,
        validityDays: settings.certValidityMs / DAY_MS,
        caValidityDays: (CA_VALIDITY_FACTOR * settings.certValidityMs) / DAY_MS,
        renewBeforeMs: settings.certRenewBeforeMs,
      });
      await (flags.force === true ? keeper.rotateNow('all') : keeper.ensure());
      if (written === 0)
        io.stdout(`${settings.certDir} already holds a valid set for ${names.join(', ')} (use --force for a new one)`);
      return EXIT_OK;
    },
  };
}
