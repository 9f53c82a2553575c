'use strict';
import { EventEmitter } from 'node:events';
import * as path from 'node:path';

const DEFAULT_RETRIES = 3;

/**
 * Retry an async operation with exponential backoff.
 * @param {Function} fn the operation
 * @param {number} retries how many times to retry
 */
export async function retry(fn, retries = DEFAULT_RETRIES) {
  let delay = 100;
  for (let attempt = 0; attempt <= retries; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt === retries) throw err;
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay *= 2;
    }
  }
}

export class Bus extends EventEmitter {
  constructor(name) {
    super();
    this.name = name;
    this.handlers = new Map();
  }

  /** Register a handler for a topic. */
  on(topic, handler) {
    const list = this.handlers.get(topic) || [];
    list.push(handler);
    this.handlers.set(topic, list);
    return this;
  }

  emitAll(topic, ...args) {
    for (const handler of this.handlers.get(topic) || []) {
      handler.apply(this, args);
    }
  }

  resolve = (file) => path.join(this.name, file);
}

const helpers = {
  twice: (x) => x * 2,
  square: function (x) { return x * x; },
};

module.exports = { retry, Bus, helpers };
