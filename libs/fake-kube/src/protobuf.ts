/**
 * Request bodies in Kubernetes' protobuf encoding, which client-go's typed clients send (helm
 * stores its releases as Secrets that way). Only what those clients write is decoded — Secrets and
 * ConfigMaps with their object metadata, and DeleteOptions — into the JSON shape the store keeps;
 * answers stay JSON, which client-go reads by the response's content type.
 */
import { KubeApiError } from './errors.js';
import type { KubeObject } from './types.js';

export const PROTOBUF_CONTENT_TYPE = 'application/vnd.kubernetes.protobuf';
const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

type Field = { number: number; varint?: bigint; bytes?: Buffer };

class Reader {
  #at = 0;
  constructor(private readonly buf: Buffer) {}

  get done(): boolean {
    return this.#at >= this.buf.length;
  }

  varint(): bigint {
    let result = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (this.#at >= this.buf.length) throw KubeApiError.badRequest('truncated protobuf varint');
      const byte = this.buf[this.#at++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
    }
  }

  field(): Field {
    const tag = Number(this.varint());
    const number = tag >>> 3;
    switch (tag & 7) {
      case 0:
        return { number, varint: this.varint() };
      case 1:
        this.#at += 8;
        return { number };
      case 2: {
        const length = Number(this.varint());
        const bytes = Buffer.from(this.buf.subarray(this.#at, this.#at + length));
        if (bytes.length !== length) throw KubeApiError.badRequest('truncated protobuf field');
        this.#at += length;
        return { number, bytes };
      }
      case 5:
        this.#at += 4;
        return { number };
      default:
        throw KubeApiError.badRequest(`unsupported protobuf wire type ${tag & 7}`);
    }
  }
}

function fields(buf: Buffer): Field[] {
  const reader = new Reader(buf);
  const out: Field[] = [];
  while (!reader.done) out.push(reader.field());
  return out;
}

function text(field: Field): string {
  return (field.bytes ?? Buffer.alloc(0)).toString('utf8');
}

/** A `map<string, …>` entry: key is field 1, value field 2. */
function mapEntry(field: Field): [string, Buffer] {
  let key = '';
  let value: Buffer = Buffer.alloc(0);
  for (const f of fields(field.bytes!)) {
    if (f.number === 1) key = text(f);
    if (f.number === 2) value = f.bytes ?? Buffer.alloc(0);
  }
  return [key, value];
}

/** `ObjectMeta`: the fields a client sets on a write (server-maintained ones are the store's). */
function objectMeta(buf: Buffer): KubeObject['metadata'] {
  const meta: KubeObject['metadata'] = {};
  const labels: Record<string, string> = {};
  const annotations: Record<string, string> = {};
  for (const f of fields(buf)) {
    if (f.number === 1 && text(f)) meta.name = text(f);
    else if (f.number === 2 && text(f)) meta.generateName = text(f);
    else if (f.number === 3 && text(f)) meta.namespace = text(f);
    else if (f.number === 6 && text(f)) meta.resourceVersion = text(f);
    else if (f.number === 11) labels[mapEntry(f)[0]] = mapEntry(f)[1].toString('utf8');
    else if (f.number === 12) annotations[mapEntry(f)[0]] = mapEntry(f)[1].toString('utf8');
  }
  if (Object.keys(labels).length > 0) meta.labels = labels;
  if (Object.keys(annotations).length > 0) meta.annotations = annotations;
  return meta;
}

function secret(buf: Buffer): KubeObject {
  const object: KubeObject = { apiVersion: 'v1', kind: 'Secret', metadata: {} };
  const data: Record<string, string> = {};
  const stringData: Record<string, string> = {};
  for (const f of fields(buf)) {
    if (f.number === 1) object.metadata = objectMeta(f.bytes!);
    else if (f.number === 2) data[mapEntry(f)[0]] = mapEntry(f)[1].toString('base64');
    else if (f.number === 3 && text(f)) object['type'] = text(f);
    else if (f.number === 4) stringData[mapEntry(f)[0]] = mapEntry(f)[1].toString('utf8');
    else if (f.number === 5) object['immutable'] = f.varint === 1n;
  }
  if (Object.keys(data).length > 0) object['data'] = data;
  if (Object.keys(stringData).length > 0) object['stringData'] = stringData;
  return object;
}

function configMap(buf: Buffer): KubeObject {
  const object: KubeObject = { apiVersion: 'v1', kind: 'ConfigMap', metadata: {} };
  const data: Record<string, string> = {};
  const binaryData: Record<string, string> = {};
  for (const f of fields(buf)) {
    if (f.number === 1) object.metadata = objectMeta(f.bytes!);
    else if (f.number === 2) data[mapEntry(f)[0]] = mapEntry(f)[1].toString('utf8');
    else if (f.number === 3) binaryData[mapEntry(f)[0]] = mapEntry(f)[1].toString('base64');
    else if (f.number === 4) object['immutable'] = f.varint === 1n;
  }
  if (Object.keys(data).length > 0) object['data'] = data;
  if (Object.keys(binaryData).length > 0) object['binaryData'] = binaryData;
  return object;
}

/** The body of a DELETE (helm deletes its release Secrets with one). */
function deleteOptions(buf: Buffer): Record<string, unknown> {
  const options: Record<string, unknown> = { apiVersion: 'v1', kind: 'DeleteOptions' };
  for (const f of fields(buf)) {
    if (f.number === 1 && f.varint !== undefined) options['gracePeriodSeconds'] = Number(f.varint);
    else if (f.number === 4 && text(f)) options['propagationPolicy'] = text(f);
    else if (f.number === 5) options['dryRun'] = [...((options['dryRun'] as string[] | undefined) ?? []), text(f)];
  }
  return options;
}

const DECODERS: Record<string, (buf: Buffer) => Record<string, unknown>> = {
  'v1/Secret': secret,
  'v1/ConfigMap': configMap,
  'v1/DeleteOptions': deleteOptions,
};

/** Decodes a protobuf request body (`k8s\0` and a `runtime.Unknown` envelope) into a JSON object. */
export function decodeProtobuf(body: Buffer): Record<string, unknown> {
  if (!body.subarray(0, 4).equals(MAGIC)) throw KubeApiError.badRequest('the protobuf body does not start with the k8s magic number');
  let apiVersion = '';
  let kind = '';
  let raw: Buffer = Buffer.alloc(0);
  for (const f of fields(body.subarray(4))) {
    if (f.number === 1) {
      for (const t of fields(f.bytes!)) {
        if (t.number === 1) apiVersion = text(t);
        if (t.number === 2) kind = text(t);
      }
    } else if (f.number === 2 && f.bytes) raw = f.bytes;
  }
  const decode = DECODERS[`${apiVersion}/${kind}`];
  if (!decode) {
    throw new KubeApiError(
      415,
      'UnsupportedMediaType',
      `fake-kube decodes protobuf only for ${Object.keys(DECODERS).join(', ')} (got ${apiVersion}/${kind}); send JSON`,
    );
  }
  return decode(raw);
}
