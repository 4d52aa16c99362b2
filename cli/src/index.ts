/**
 * The `berth` command line.
 */
import { readFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { CliError } from './client.js';
import { loadCliEnv } from './env.js';

export type { PlatformConfig, RunningPlatform } from './platform.js';

/** Berth packages are versioned together; the CLI's version is the platform's. */
export const BERTH_VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

// Commands load their modules when run, so `berth version` or `berth keys list` do not pay for
// importing every service.
const load = {
  up: () => import('./commands/up.js'),
  down: () => import('./commands/down.js'),
  serve: () => import('./commands/serve.js'),
  status: () => import('./commands/status.js'),
  keys: () => import('./commands/keys.js'),
  tenants: () => import('./commands/tenants.js'),
  dev: () => import('./commands/dev.js'),
  login: () => import('./commands/login.js'),
  deploy: () => import('./commands/deploy.js'),
  deployManage: () => import('./commands/deploy-manage.js'),
};

const print = (line: string) => console.log(line);

function connectionOptions(command: Command): Command {
  return command
    .addOption(new Option('--url <url>', 'gateway URL (default: BERTH_HOST_URL, berth login, or .berth/credentials.json)'))
    .addOption(new Option('--api-key <key>', 'API key (default: BERTH_API_KEY, the berth login token, or .berth/credentials.json)'))
    .addOption(new Option('--json', 'print JSON'));
}

export function program(): Command {
  const env = () => loadCliEnv();
  const cli = new Command('berth').description('Berth: a self-hostable agent deployment platform').version(BERTH_VERSION, '-v, --version');

  cli
    .command('up')
    .description('provision Postgres, start the whole platform in one process, print URL and API key')
    .action(async () => {
      await (await load.up()).up(env(), print);
    });
  cli
    .command('down')
    .description('stop the platform and its Postgres (data is kept)')
    .action(async () => (await load.down()).down(env(), print));
  cli
    .command('serve')
    .description('run the whole platform in the foreground (needs DATABASE_URL)')
    .action(async () => (await load.serve()).serve(env()));
  cli
    .command('status')
    .description('show whether the platform runs and each readiness check')
    .action(async () => {
      if (!(await (await load.status()).status(env(), print))) process.exitCode = 1;
    });
  cli
    .command('dev')
    .description('serve a LangGraph.js project (langgraph.json) with durable state under its .berth/')
    .option('-c, --config <path>', 'path to langgraph.json', './langgraph.json')
    .option('-p, --port <port>', 'port to listen on (a free one when taken)', '2024')
    .option('--host <host>', 'interface to listen on', '127.0.0.1')
    .option('-n, --workers <count>', 'runs executed at the same time, per process', '10')
    .option('--processes <count>', 'processes serving the port (API + workers each), for more than one core', '1')
    .option('--no-reload', 'keep serving the code as it was at start when the project’s files change')
    .action(async (o) => (await load.dev()).dev(env(), o, print));
  cli
    .command('login')
    .description('log in to a Berth gateway: approve in a browser with an API key, keep the token in ~/.config/berth')
    .option('--host <url>', 'gateway URL (default: BERTH_HOST_URL, the platform `berth up` started, or http://127.0.0.1:8080)')
    .option('--timeout <seconds>', 'give up waiting for the approval after this long (default: when the link expires)')
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
    .addOption(new Option('--role <role>', 'admin keys manage keys of their tenant').choices(['admin', 'member']).default('member'))
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
  connectionOptions(keys.command('revoke').description('revoke an API key').argument('<key_id>'))
    .option('--tenant <tenant_id>', 'tenant (default: the tenant of your key)')
    .action(async (keyId: string, o) => {
      await (await load.keys()).keysRevoke(env(), { ...o, keyId }, print);
    });

  const tenants = cli.command('tenants').description('manage tenants (needs the bootstrap admin key)');
  connectionOptions(tenants.command('create').description('create a tenant and its first admin key').argument('<name>')).action(
    async (name: string, o) => {
      await (await load.tenants()).tenantsCreate(env(), { ...o, name }, print);
    },
  );
  connectionOptions(tenants.command('list').description('list tenants')).action(async (o) => {
    await (await load.tenants()).tenantsList(env(), o, print);
  });
  return cli;
}

/** Options of every deploy command: which gateway, which credential. */
function deployConnectionOptions(command: Command): Command {
  return command
    .addOption(new Option('--host <url>', 'gateway URL (default: BERTH_HOST_URL from the environment or .env, berth login, berth up)'))
    .addOption(new Option('--api-key <key>', 'API key (default: BERTH_API_KEY from the environment or .env, else the berth login token)'))
    .addOption(new Option('--json', 'print JSON'));
}

function deployCommands(cli: Command, env: () => ReturnType<typeof loadCliEnv>): void {
  const deploy = deployConnectionOptions(
    cli
      .command('deploy')
      .description('deploy the LangGraph project in this directory (creates the deployment, or updates the one of that name)')
      // `deploy logs --name` is not `deploy --name`: options belong to the command they follow.
      .enablePositionalOptions(),
  )
    .option('--name <name>', 'deployment name (default: this directory’s name, as [a-z0-9-])')
    .addOption(new Option('--deployment-type <type>', 'for a new deployment (default: dev)').choices(['dev', 'prod']))
    .option('-c, --config <path>', 'path to langgraph.json', 'langgraph.json')
    .option('--no-wait', 'return once the project is uploaded')
    .option('--timeout <seconds>', 'stop waiting for the revision after this long', '900')
    .action(async (o) => {
      await (await load.deploy()).deploy(env(), o, print);
    });
  deployConnectionOptions(deploy.command('list').description('list deployments: id, name, type, status, URL'))
    .option('--name-contains <text>', 'only deployments whose name contains this')
    .action(async (o) => {
      await (await load.deployManage()).deployList(env(), o, print);
    });
  deployConnectionOptions(deploy.command('revisions').description('list the revisions of a deployment, newest first').argument('<deployment_id>'))
    .option('--limit <count>', 'revisions to show', '10')
    .action(async (deploymentId: string, o) => {
      await (await load.deployManage()).deployRevisions(env(), { ...o, deploymentId }, print);
    });
  deployConnectionOptions(deploy.command('logs').description('show the build and deploy logs of a deployment (its latest revision by default)'))
    .option('--name <name>', 'deployment name (default: this directory’s name)')
    .option('--deployment-id <id>', 'deployment id, instead of --name')
    .option('--revision-id <id>', 'a revision other than the latest')
    .addOption(new Option('--type <type>', 'only build or deploy logs').choices(['build', 'deploy']))
    .option('--limit <count>', 'last lines to show', '100')
    .option('-f, --follow', 'keep printing new lines (polls every 2 s; Ctrl-C stops)')
    .action(async (o) => {
      await (await load.deployManage()).deployLogs(env(), o, print);
    });
  deployConnectionOptions(deploy.command('delete').description('delete a deployment (its agent server stops)').argument('<deployment_id>')).action(
    async (deploymentId: string, o) => {
      await (await load.deployManage()).deployDelete(env(), { ...o, deploymentId }, print);
    },
  );
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
