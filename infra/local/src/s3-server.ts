/**
 * An S3-compatible server on 127.0.0.1 (npm `s3rver`), storing objects in a folder. Clients use
 * path-style addressing and any credentials. It does not implement AbortMultipartUpload.
 */
import { mkdir } from 'node:fs/promises';

export interface S3ServerOptions {
  /** Folder holding buckets and objects. */
  directory: string;
  /** 0 or unset = any free port. */
  port?: number;
  /** Buckets created at start. */
  buckets?: string[];
}

interface S3rverInstance {
  run(): Promise<{ address: string; port: number }>;
  close(): Promise<void>;
}

export class S3Server {
  private server?: S3rverInstance;
  endpoint = '';

  constructor(private readonly options: S3ServerOptions) {}

  /** Access key accepted by the server (s3rver accepts only this pair when it checks signatures). */
  static readonly accessKeyId = 'S3RVER';
  static readonly secretAccessKey = 'S3RVER';

  async start(): Promise<{ endpoint: string }> {
    await mkdir(this.options.directory, { recursive: true });
    // Loaded when used: it is heavy (about 30 MB), and most users of this package (the platform's
    // supervisor, berth down) never start an S3 server.
    // @ts-expect-error s3rver ships no types
    const { default: S3rver } = (await import('s3rver')) as { default: new (options: object) => S3rverInstance };
    const server: S3rverInstance = new S3rver({
      address: '127.0.0.1',
      port: this.options.port ?? 0,
      directory: this.options.directory,
      silent: true,
      configureBuckets: (this.options.buckets ?? []).map((name) => ({ name })),
    });
    const { port } = await server.run();
    this.server = server;
    this.endpoint = `http://127.0.0.1:${port}`;
    return { endpoint: this.endpoint };
  }

  async stop(): Promise<void> {
    await this.server?.close();
    this.server = undefined;
  }
}
