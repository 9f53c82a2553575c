// A small observable store, in the style of front-end state libraries.
import { EventEmitter } from './events.js';

const DEFAULT_OPTIONS = {
  strict: false,
  devtools: typeof window !== 'undefined',
};

/**
 * Holds state and notifies subscribers of each change.
 */
export class Store extends EventEmitter {
  static instances = 0;
  #state;
  #reducers = new Map();

  constructor(initial = {}, options = DEFAULT_OPTIONS) {
    super();
    this.#state = { ...initial };
    this.options = { ...DEFAULT_OPTIONS, ...options };
    Store.instances += 1;
  }

  /** The current state (a frozen copy). */
  get state() {
    return Object.freeze({ ...this.#state });
  }

  register = (name, reducer, { replace = false } = {}) => {
    if (this.#reducers.has(name) && !replace) {
      throw new Error(`reducer ${name} exists`);
    }
    this.#reducers.set(name, reducer);
  };

  dispatch = (action, meta = {}) => {
    for (const [name, reducer] of this.#reducers) {
      this.#state[name] = reducer(this.#state[name], action, meta);
    }
    this.emit('change', this.#state, action);
  };

  subscribe(listener, { once = false, filter = () => true } = {}) {
    const wrapped = (state, action) => {
      if (filter(action)) listener(state, action);
    };
    once ? this.once('change', wrapped) : this.on('change', wrapped);
    return () => this.off('change', wrapped);
  }

  async *changes(signal) {
    while (!signal?.aborted) {
      yield await new Promise((resolve) => this.once('change', resolve));
    }
  }

  static create(initial, options) {
    return new Store(initial, options);
  }
}
