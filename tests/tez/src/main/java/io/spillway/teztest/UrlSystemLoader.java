package io.spillway.teztest;

import java.net.URL;
import java.net.URLClassLoader;

/**
 * The system class loader of the Tez JVMs ({@code -Djava.system.class.loader}). Tez 0.9.1 predates
 * Java 9: when a DAG starts, its app master casts the system class loader to URLClassLoader to add
 * the DAG's extra class path (DAGImpl.StartTransition, ReflectionUtils
 * .addResourcesToSystemClassLoader), which fails on Java 17, whose application loader is not one.
 * This loader is one, and delegates everything to the JVM's own application loader.
 */
public final class UrlSystemLoader extends URLClassLoader {
  static {
    registerAsParallelCapable();
  }

  public UrlSystemLoader(ClassLoader parent) {
    super(new URL[0], parent);
  }
}
