/**
 * The `berth` command line.
 */
import { Command, Option } from 'commander';
import { CliError } from './client.js';
import { loadCliEnv } from './env.js';
import { choiceOption, integerOption } from './flags.js';
import { SERVICE_TARGETS, type ServiceTarget } from './service-targets.js';
import { BERTH_VERSION } from './version.js';

export type { PlatformConfig, RunningPlatform } from './platform.js';

export { BERTH_VERSION } from './version.js';

// Commands load their modules when run, so `berth version` or `berth keys list` do not pay for
// importing every service.
const load = {
  up: () => import('./commands/up.js'),
  down: () => import('./commands/down.js'),
  backup: () => import('./commands/backup.js'),
  restore: () => import('./commands/restore.js'),
  serve: () => import('./commands/serve.js'),
  supervise: () => import('./commands/supervise.js'),
  status: () => import('./commands/status.js'),
  keys: () => import('./commands/keys.js'),
  keysBootstrap: () => import('./commands/keys-bootstrap.js'),
  tenants: () => import('./commands/tenants.js'),
  dev: () => import('./commands/dev.js'),
  login: () => import('./commands/login.js'),
  deploy: () => import('./commands/deploy.js'),
  deployManage: () => import('./commands/deploy-manage.js'),
};

const print = (line: string) => console.log(line);

/**
 * The one definition of how a command reaches a gateway (resolved by connection.ts): `--url` (or
 * its alias `--host`), `--api-key`, and `--json` where the command prints a list or a result.
 */
function connectionOptions(command: Command, include: { apiKey?: false; json?: false } = {}): Command {
  command
    .addOption(
      new Option(
        '--url <url>',
        'gateway URL, alias --host (default: BERTH_HOST_URL, the berth login host, the platform berth up started, else http://127.0.0.1:8080)',
      ),
    )
    .addOption(new Option('--host <url>', 'the same as --url').hideHelp());
  if (include.apiKey !== false) {
    command.addOption(new Option('--api-key <key>', 'API key (default: BERTH_API_KEY, the berth login token, the key berth up wrote)'));
  }
  if (include.json !== false) command.addOption(new Option('--json', 'print JSON'));
  return command;
}

export function program(): Command {
  const env = () => loadCliEnv();
  const cli = new Command('berth')
    .description('Berth: a self-hostable agent deployment platform')
    .version(BERTH_VERSION, '-v, --version')
    // Options belong to the command they follow: without this, `berth deploy list --json` hands
    // --json to `deploy` (which has one too) and `list` never sees it.
    .enablePositionalOptions();

  cli
    .command('up')
    .description('provision Postgres, start the whole platform in one process, print URL and API key')
    .action(async () => {
      await (await load.up()).up(env(), print);
    });
  cli
    .command('down')
    .description('stop the platform and its Postgres (data is kept); from any folder, the one status and deploy reach')
    .action(async () => (await load.down()).down(env(), print));
  cli
    .command('backup')
    .description("write one archive of the platform: its databases and every deployment's, the secret key, the built revisions (it may keep running)")
    .option('-o, --output <file>', 'the archive to write (default: berth-backup-<time>.tar.gz here)')
    .action(async (o: { output?: string }) => {
      await (await load.backup()).backup(env(), o, print);
    });
  cli
    .command('restore')
    .description('restore a berth backup into a fresh state folder (BERTH_STATE_DIR), checking every table against the backup; then make up')
    .argument('<archive>', 'a file berth backup wrote')
    .action(async (archive: string) => (await load.restore()).restore(env(), archive, print));
  cli
    .command('serve')
    .description('run the whole platform, or one service of it (--service), in the foreground (needs DATABASE_URL)')
    .addOption(
      choiceOption(
        '--service <name>',
        'the one service to run, configured by its own environment (one Deployment each on Kubernetes)',
        SERVICE_TARGETS,
      ).default('all'),
    )
    .action(async (o: { service: ServiceTarget }) => (await load.serve()).serve(env(), o.service));
  // What `berth up` leaves running; not for people to start.
  cli
    .command('supervise', { hidden: true })
    .description('run and restart Postgres, the sandbox engine and the platform (started by berth up)')
    .action(async () => (await load.supervise()).supervise(env()));
  connectionOptions(cli.command('status').description('show whether the platform runs and each readiness check (of another gateway with --url)'), {
    apiKey: false,
  }).action(async (o) => {
    if (!(await (await load.status()).status(env(), o, print))) process.exitCode = 1;
  });
  cli
    .command('dev')
    .description('serve a LangGraph.js project (langgraph.json) with durable state under its .berth/')
    .option('-c, --config <path>', 'path to langgraph.json', './langgraph.json')
    .addOption(integerOption('-p, --port <port>', 'port to listen on (a free one when taken)', { min: 0, max: 65535 }).default(2024))
    .option('--host <host>', 'interface to listen on', '127.0.0.1')
    .addOption(integerOption('-n, --workers <count>', 'runs executed at the same time, per process', { min: 1, max: 1000 }).default(10))
    .addOption(integerOption('--processes <count>', 'processes serving the port (API + workers each), for more than one core', { min: 1, max: 64 }).default(1))
    .option('--no-reload', 'keep serving the code as it was at start when the project’s files change')
    .option('--no-trace', 'do not trace runs into the local Berth platform (traced by default when one answers)')
    .action(async (o) => (await load.dev()).dev(env(), o, print));
  connectionOptions(cli.command('login').description('log in to a Berth gateway: approve in a browser with an API key, keep the token in ~/.config/berth'), {
    apiKey: false,
    json: false,
  })
    .addOption(integerOption('--timeout <seconds>', 'give up waiting for the approval after this long (default: when the link expires)', { min: 1, max: 3600 }))
    .action(async (o) => {
      await (await load.login()).login(env(), o, print);
    });
  cli
    .command('logout')
    .description('forget the token `berth login` stored')
    .action(async () => {
      await (await load.login()).logout(env(), print);
    });
  cli
    .command('version')
    .description('print the version')
    .action(() => print(BERTH_VERSION));

  deployCommands(cli, env);

  const keys = cli.command('keys').description('manage API keys');
  connectionOptions(keys.command('create').description('create an API key (shown once)'))
    .requiredOption('--name <name>', 'a name to recognise the key by')
    .addOption(choiceOption('--role <role>', 'admin keys manage keys of their tenant', ['admin', 'member']).default('member'))
    .option('--expires-at <time>', 'ISO 8601 time after which the key stops working')
    .option('--tenant <tenant_id>', 'tenant (default: the tenant of your key)')
    .action(async (o) => {
      await (await load.keys()).keysCreate(env(), o, print);
    });
  connectionOptions(keys.command('list').description('list API keys of a tenant'))
    .option('--tenant <tenant_id>', 'tenant (default: the tenant of your key)')
    .action(async (o) => {
      await (await load.keys()).keysList(env(), o, print);
    });
  keys
    .command('bootstrap')
    .description('mint an admin key of the system tenant in the platform database (needs DATABASE_URL; on Kubernetes: kubectl exec into the gateway)')
    .option('--json', 'print {"tenant_id", "api_key"}')
    .action(async (o: { json?: boolean }) => {
      await (await load.keysBootstrap()).keysBootstrap(env(), o, print);
    });
  connectionOptions(keys.command('revoke').description('revoke an API key').argument('<key_id>'))
    .option('--tenant <tenant_id>', 'tenant (default: the tenant of your key)')
    .action(async (keyId: string, o) => {
      await (await load.keys()).keysRevoke(env(), { ...o, keyId }, print);
    });

  const tenants = cli.command('tenants').description('manage tenants (needs the bootstrap admin key)');
  connectionOptions(tenants.command('create').description('create a tenant and its first admin key').argument('<name>')).action(async (name: string, o) => {
    await (await load.tenants()).tenantsCreate(env(), { ...o, name }, print);
  });
  connectionOptions(tenants.command('list').description('list tenants')).action(async (o) => {
    await (await load.tenants()).tenantsList(env(), o, print);
  });
  return cli;
}

function deployCommands(cli: Command, env: () => ReturnType<typeof loadCliEnv>): void {
  const deploy = connectionOptions(
    cli
      .command('deploy')
      .description('deploy the LangGraph project in this directory (creates the deployment, or updates the one of that name)')
      // `deploy logs --name` is not `deploy --name`: options belong to the command they follow.
      .enablePositionalOptions(),
  )
    .option('--name <name>', 'deployment name (default: this directory’s name, as [a-z0-9-])')
    .addOption(choiceOption('--deployment-type <type>', 'for a new deployment (default: dev)', ['dev', 'prod']))
    .option('-c, --config <path>', 'path to langgraph.json', 'langgraph.json')
    .option('--no-wait', 'return once the project is uploaded')
    .addOption(integerOption('--timeout <seconds>', 'stop waiting for the revision after this long', { min: 1, max: 86_400 }).default(900))
    // `berth deploy --json list` would leave --json with `deploy`: say where it goes instead of ignoring it.
    .hook('preSubcommand', (command, subcommand) => {
      const given = command.options.filter((o) => command.getOptionValueSource(o.attributeName()) === 'cli').map((o) => o.long ?? o.short);
      if (given.length) throw new CliError(`put ${given.join(', ')} after the subcommand: berth deploy ${subcommand.name()} ${given.join(' ')} …`);
    })
    .action(async (o) => {
      await (await load.deploy()).deploy(env(), o, print);
    });
  connectionOptions(deploy.command('list').description('list deployments: id, name, type, status, URL'))
    .option('--name-contains <text>', 'only deployments whose name contains this')
    .action(async (o) => {
      await (await load.deployManage()).deployList(env(), o, print);
    });
  deploymentTarget(connectionOptions(deploy.command('revisions').description('list the revisions of a deployment, newest first')))
    .addOption(integerOption('--limit <count>', 'revisions to show', { min: 1, max: 100 }).default(10))
    .action(async (deployment: string | undefined, o) => {
      await (await load.deployManage()).deployRevisions(env(), { ...o, deployment }, print);
    });
  deploymentTarget(connectionOptions(deploy.command('logs').description('show the build and deploy logs of a deployment (its latest revision by default)')))
    .option('--revision-id <id>', 'a revision other than the latest')
    .addOption(choiceOption('--type <type>', 'only build or deploy logs', ['build', 'deploy']))
    // No commander default: one would hide a --limit given instead.
    .addOption(integerOption('--tail <count>', 'last lines to show (default: 100)', { min: 1, max: 100_000 }))
    // The flag's old name: scripts that pass it keep working.
    .addOption(integerOption('--limit <count>', 'the same as --tail', { min: 1, max: 100_000 }).hideHelp())
    .option('-f, --follow', 'keep printing lines as they are written, on to the next revision when one replaces it (Ctrl-C stops)')
    .action(async (deployment: string | undefined, o) => {
      await (await load.deployManage()).deployLogs(env(), { ...o, deployment }, print);
    });
  deploymentTarget(connectionOptions(deploy.command('delete').description('delete a deployment (its agent server stops); asks first')))
    .option('-y, --yes', 'do not ask (needed when stdin is not a terminal)')
    .action(async (deployment: string | undefined, o) => {
      await (await load.deployManage()).deployDelete(env(), { ...o, deployment }, print);
    });
}

/**
 * The one way every `deploy` subcommand is told which deployment (resolved by deploy/target.ts): a
 * name or id as the argument, `--name`, `--deployment-id`, else the one named after this folder, as
 * `berth deploy` here names it.
 */
function deploymentTarget(command: Command): Command {
  return command
    .argument('[deployment]', 'deployment name or id (default: this folder’s deployment, as `berth deploy` names it)')
    .option('--name <name>', 'deployment name, instead of the argument')
    .option('--deployment-id <id>', 'deployment id, instead of the argument');
}

export async function main(argv: string[]): Promise<number> {
  try {
    await program().parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    console.error(`berth: ${error instanceof CliError || error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
}
