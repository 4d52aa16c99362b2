/**
 * Each deployment's agent servers reach the platform's Redis as a user of their own — never as the
 * platform's. The user `berth_agent_<id>` (the name of the deployment's Postgres database and role)
 * may touch only the keys and channels of its agent servers (`berth:agent_<id>:*`) with the commands
 * they run (`redisAclRules` of the agent runtime). Its password is derived from the platform's
 * secret key, so creating the user again gives it the same one: agent servers keep connecting after
 * Redis lost its users (a restart without an ACL file), once the control plane re-creates them — at
 * its start, before every deploy and every `resyncIntervalMs`.
 */
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { redisAclRules, redisKeyPrefix } from '@berth/agent-contract';
import type { Logger } from '@berth/log';
import type { SecretBox } from '@berth/secret-box';
import { traceRedis } from '@berth/tracing';
import { agentDatabaseName, agentSchema } from './agent-databases.js';
import { watchRedis } from './metrics.js';

export interface AgentRedisOptions {
  /** The platform's Redis (`REDIS_URL`); its user must be allowed `ACL SETUSER`, `ACL DELUSER` and `ACL USERS`. */
  url: string;
  secretBox: SecretBox;
  log: Logger;
  /**
   * How often users of serving deployments that Redis lost are created again, in milliseconds.
   * @default 60000
   */
  resyncIntervalMs?: number;
}

/** The platform's Redis cannot give agent servers users of their own: no permission, or older than Redis 7. */
export class AgentRedisSetupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AgentRedisSetupError';
  }
}

/** Redis 7 is the first to deny subcommands (`-script|flush`) and to check keys inside scripts. */
const MIN_REDIS_MAJOR = 7;
const OFF_SWITCH = 'BERTH_AGENT_REDIS=off';

export class AgentRedis {
  private readonly redis: Redis;
  private timer?: NodeJS.Timeout;
  private unwatch?: () => void;

  constructor(private readonly options: AgentRedisOptions) {
    this.redis = traceRedis(new Redis(options.url, { lazyConnect: true, connectionName: 'berth-control-plane-agent-redis' }));
    this.redis.on('error', (error: unknown) => options.log.warn({ err: error }, 'agent redis users: redis connection error'));
  }

  /** The Redis user of a deployment's agent servers. */
  static user(deploymentId: string): string {
    return agentDatabaseName(deploymentId);
  }

  /**
   * Checks that this control plane may manage Redis users, creates (or updates) those of `live()`
   * deployments and keeps re-creating the ones Redis loses until `close`.
   */
  async start(live: () => Promise<string[]>): Promise<void> {
    try {
      await this.redis.call('ACL', 'USERS');
    } catch (error) {
      const message = (error as Error).message ?? '';
      if (/unknown command/i.test(message)) throw this.tooOld('older than 6: no ACL', error);
      if (message.startsWith('NOPERM')) {
        throw new AgentRedisSetupError(
          `the control plane's Redis user may not manage ACL users (${message}): agent servers get Redis users of their own. ` +
            'Grant the user of REDIS_URL the acl command (ACL SETUSER <user> +acl), ' +
            `or set ${OFF_SWITCH} to keep agent servers' queues and run events in Postgres`,
          { cause: error },
        );
      }
      throw error;
    }
    const version = /^redis_version:(\S+)/m.exec(String(await this.redis.info('server')))?.[1] ?? 'unknown';
    if (!(Number.parseInt(version, 10) >= MIN_REDIS_MAJOR)) throw this.tooOld(version);
    this.unwatch ??= watchRedis(() => this.redis.info(), this.options.log);
    for (const deploymentId of await live()) await this.ensure(deploymentId);
    const interval = this.options.resyncIntervalMs ?? 60_000;
    const tick = () => {
      this.timer = setTimeout(() => {
        void this.restore(live)
          .catch((error: unknown) => this.options.log.error({ err: error }, 'agent redis users: re-creating lost users failed'))
          .finally(() => this.timer && tick());
      }, interval);
      this.timer.unref();
    };
    tick();
  }

  /** Creates or updates the deployment's user and returns the URL its agent servers connect with. */
  async ensure(deploymentId: string): Promise<string> {
    const password = this.password(deploymentId);
    const hash = createHash('sha256').update(password).digest('hex');
    // `reset` first: the user ends up with exactly these rules, whatever it had before.
    await this.redis.call('ACL', 'SETUSER', AgentRedis.user(deploymentId), 'reset', 'on', `#${hash}`, ...redisAclRules(agentSchema(deploymentId)));
    const url = new URL(this.options.url);
    url.username = AgentRedis.user(deploymentId);
    url.password = password;
    return url.toString();
  }

  /** Creates the users of `live()` deployments that Redis does not have (left alone: the ones it has). */
  async restore(live: () => Promise<string[]>): Promise<string[]> {
    const existing = new Set((await this.redis.call('ACL', 'USERS')) as string[]);
    const lost = (await live()).filter((id) => !existing.has(AgentRedis.user(id)));
    for (const deploymentId of lost) await this.ensure(deploymentId);
    if (lost.length) this.options.log.warn({ deployments: lost }, 'agent redis users: re-created the users Redis had lost (a restart without an ACL file?)');
    return lost;
  }

  /** Deletes the deployment's user (ending its connections) and its keys. Unknown deployments are a no-op. */
  async remove(deploymentId: string): Promise<void> {
    await this.redis.call('ACL', 'DELUSER', AgentRedis.user(deploymentId));
    const match = `${redisKeyPrefix(agentSchema(deploymentId))}:*`;
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', match, 'COUNT', 1000);
      if (keys.length) await this.redis.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
  }

  async close(): Promise<void> {
    this.unwatch?.();
    this.unwatch = undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.redis.status === 'ready') await this.redis.quit().catch(() => this.redis.disconnect());
    else this.redis.disconnect();
  }

  private tooOld(version: string, cause?: unknown): AgentRedisSetupError {
    return new AgentRedisSetupError(
      `agent servers' Redis users need Redis ${MIN_REDIS_MAJOR} or later (this one is ${version}): upgrade it, or set ${OFF_SWITCH}`,
      { cause },
    );
  }

  private password(deploymentId: string): string {
    return this.options.secretBox.derive(`agent-redis/${deploymentId}`);
  }
}
