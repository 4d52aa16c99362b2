/**
 * The bridge between protobuf-es descriptors and grpc-js: method definitions (path and binary
 * (de)serializers) and metadata conversion. Shared by the server and the client.
 */
import { fromBinary, toBinary, type DescMethod, type Message } from '@bufbuild/protobuf';
import grpc from '@grpc/grpc-js';
import type { SupportedMethodKind } from './types.js';

/** The gRPC path of a method: `/${service.typeName}/${method.name}`. */
export function methodPath(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

/** True for the method kinds @berth/rpc serves and calls. */
export function isSupported(method: DescMethod): method is DescMethod & { methodKind: SupportedMethodKind } {
  return ['unary', 'server_streaming', 'client_streaming', 'bidi_streaming'].includes(method.methodKind);
}

/** The grpc-js method definition of a method. */
export function methodDefinition(method: DescMethod): grpc.MethodDefinition<Message, Message> {
  return {
    path: methodPath(method),
    requestStream: method.methodKind === 'client_streaming' || method.methodKind === 'bidi_streaming',
    responseStream: method.methodKind === 'server_streaming' || method.methodKind === 'bidi_streaming',
    requestSerialize: (message) => Buffer.from(toBinary(method.input, message)),
    requestDeserialize: (bytes) => fromBinary(method.input, bytes),
    responseSerialize: (message) => Buffer.from(toBinary(method.output, message)),
    responseDeserialize: (bytes) => fromBinary(method.output, bytes),
    originalName: method.localName,
  };
}

/** A plain record (`*-bin` values base64) as grpc-js metadata. */
export function toGrpcMetadata(record: Readonly<Record<string, string>> | undefined): grpc.Metadata {
  const metadata = new grpc.Metadata();
  for (const [key, value] of Object.entries(record ?? {})) {
    const lower = key.toLowerCase();
    if (lower.endsWith('-bin')) metadata.set(lower, Buffer.from(value, 'base64'));
    else metadata.set(lower, value);
  }
  return metadata;
}

/** grpc-js metadata as a plain record: first value per key, `*-bin` values base64. */
export function fromGrpcMetadata(metadata: grpc.Metadata): Record<string, string> {
  const record: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata.getMap())) {
    record[key] = typeof value === 'string' ? value : Buffer.from(value).toString('base64');
  }
  return record;
}
