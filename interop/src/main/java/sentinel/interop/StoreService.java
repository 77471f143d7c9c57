package sentinel.interop;

import com.alibaba.csp.sentinel.Entry;
import com.alibaba.csp.sentinel.SphU;
import com.alibaba.csp.sentinel.datasource.Converter;
import com.alibaba.csp.sentinel.datasource.FileRefreshableDataSource;
import com.alibaba.csp.sentinel.datasource.ReadableDataSource;
import com.alibaba.csp.sentinel.datasource.etcd.EtcdDataSource;
import com.alibaba.csp.sentinel.datasource.nacos.NacosDataSource;
import com.alibaba.csp.sentinel.datasource.redis.RedisDataSource;
import com.alibaba.csp.sentinel.datasource.redis.config.RedisConnectionConfig;
import com.alibaba.csp.sentinel.slots.block.BlockException;
import com.alibaba.csp.sentinel.slots.block.authority.AuthorityRule;
import com.alibaba.csp.sentinel.slots.block.authority.AuthorityRuleManager;
import com.alibaba.csp.sentinel.slots.block.degrade.DegradeRule;
import com.alibaba.csp.sentinel.slots.block.degrade.DegradeRuleManager;
import com.alibaba.csp.sentinel.slots.block.flow.FlowRule;
import com.alibaba.csp.sentinel.slots.block.flow.FlowRuleManager;
import com.alibaba.csp.sentinel.slots.block.flow.param.ParamFlowRule;
import com.alibaba.csp.sentinel.slots.block.flow.param.ParamFlowRuleManager;
import com.alibaba.csp.sentinel.slots.system.SystemRule;
import com.alibaba.csp.sentinel.slots.system.SystemRuleManager;
import com.alibaba.csp.sentinel.property.SentinelProperty;
import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.TypeReference;
import com.alibaba.nacos.api.NacosFactory;
import com.alibaba.nacos.api.config.ConfigService;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The Java service of the store interop tests: Sentinel 1.8 reading flow rules from one
 * store with Sentinel's own data source, and publishing rules the way Java services and the
 * dashboard do. Driven over stdin, one command a line; every answer is one line on stdout.
 *
 * <pre>
 * StoreService redis HOST PORT KEY CHANNEL | etcd ENDPOINTS KEY | nacos ADDR DATA_ID | file PATH
 *   rules            the active rules of the family (FlowRuleManager.getRules()...) as JSON
 *
 * The family is flow, or the one the environment variable INTEROP_FAMILY names: degrade,
 * paramFlow, authority or system.
 *   burst RES N      N calls to RES at once; prints how many passed
 *   publish JSON     writes JSON to the store as Sentinel's publishers do
 *   quit
 * </pre>
 */
public final class StoreService {
    private static final String GROUP = "SENTINEL_GROUP";
    /** The family this service reads, and its parser. */
    private static final String FAMILY =
        System.getenv().getOrDefault("INTEROP_FAMILY", "flow");
    @SuppressWarnings({"rawtypes", "unchecked"})
    private static final Converter<String, List> PARSER = source -> {
        switch (FAMILY) {
            case "degrade":
                return JSON.parseObject(source, new TypeReference<List<DegradeRule>>() {});
            case "paramFlow":
                return JSON.parseObject(source, new TypeReference<List<ParamFlowRule>>() {});
            case "authority":
                return JSON.parseObject(source, new TypeReference<List<AuthorityRule>>() {});
            case "system":
                return JSON.parseObject(source, new TypeReference<List<SystemRule>>() {});
            default:
                return JSON.parseObject(source, new TypeReference<List<FlowRule>>() {});
        }
    };

    /** Hands the source's property to the family's rule manager. */
    @SuppressWarnings({"rawtypes", "unchecked"})
    private static void register(SentinelProperty property) {
        switch (FAMILY) {
            case "degrade": DegradeRuleManager.register2Property(property); break;
            case "paramFlow": ParamFlowRuleManager.register2Property(property); break;
            case "authority": AuthorityRuleManager.register2Property(property); break;
            case "system": SystemRuleManager.register2Property(property); break;
            default: FlowRuleManager.register2Property(property);
        }
    }

    /** The family's active rules. */
    private static Object activeRules() {
        switch (FAMILY) {
            case "degrade": return DegradeRuleManager.getRules();
            case "paramFlow": return ParamFlowRuleManager.getRules();
            case "authority": return AuthorityRuleManager.getRules();
            case "system": return SystemRuleManager.getRules();
            default: return FlowRuleManager.getRules();
        }
    }

    private StoreService() {}

    /** Publishes a value the way Sentinel's publishers for this store do. */
    private interface Publisher {
        void publish(String value) throws Exception;
    }

    public static void main(String[] argv) throws Exception {
        System.setProperty("csp.sentinel.metric.flush.interval", "0");
        String store = argv[0];
        @SuppressWarnings("rawtypes")
        ReadableDataSource<String, List> source;
        Publisher publisher;
        switch (store) {
            case "redis": {
                String host = argv[1];
                int port = Integer.parseInt(argv[2]);
                String key = argv[3];
                String channel = argv[4];
                RedisConnectionConfig config = RedisConnectionConfig.builder()
                    .withHost(host).withPort(port).build();
                source = new RedisDataSource<>(config, key, channel, PARSER);
                RedisClient client = RedisClient.create(RedisURI.create(host, port));
                StatefulRedisConnection<String, String> connection = client.connect();
                RedisCommands<String, String> commands = connection.sync();
                // Sentinel's documented publisher: the value stored and published at once.
                publisher = value -> {
                    commands.multi();
                    commands.set(key, value);
                    commands.publish(channel, value);
                    commands.exec();
                };
                break;
            }
            case "etcd": {
                System.setProperty("csp.sentinel.etcd.endpoints", argv[1]);
                String key = argv[2];
                source = new EtcdDataSource<>(key, PARSER);
                Client client = Client.builder().endpoints(argv[1].split(",")).build();
                publisher = value -> client.getKVClient()
                    .put(ByteSequence.from(key, StandardCharsets.UTF_8),
                        ByteSequence.from(value, StandardCharsets.UTF_8))
                    .get(10, TimeUnit.SECONDS);
                break;
            }
            case "nacos": {
                String addr = argv[1];
                String dataId = argv[2];
                source = new NacosDataSource<>(addr, GROUP, dataId, PARSER);
                ConfigService config = NacosFactory.createConfigService(addr);
                // The dashboard's Nacos publisher: the JSON list as content, group SENTINEL_GROUP.
                publisher = value -> {
                    if (!config.publishConfig(dataId, GROUP, value)) {
                        throw new IllegalStateException("nacos refused the publish");
                    }
                };
                break;
            }
            case "file": {
                File file = new File(argv[1]);
                source = new FileRefreshableDataSource<>(file, PARSER, 100, 1024 * 1024,
                    StandardCharsets.UTF_8);
                publisher = value -> {
                    File tmp = new File(file.getPath() + ".tmp");
                    Files.write(tmp.toPath(), value.getBytes(StandardCharsets.UTF_8));
                    Files.move(tmp.toPath(), file.toPath(), StandardCopyOption.REPLACE_EXISTING,
                        StandardCopyOption.ATOMIC_MOVE);
                };
                break;
            }
            default:
                System.err.println("unknown store " + store);
                System.exit(2);
                return;
        }
        register(source.getProperty());
        System.out.println("ready");
        System.out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ", 3);
            try {
                switch (parts[0]) {
                    case "rules":
                        System.out.println(JSON.toJSONString(activeRules()));
                        break;
                    case "burst": {
                        int passed = 0;
                        for (int i = 0; i < Integer.parseInt(parts[2]); i++) {
                            try {
                                Entry entry = SphU.entry(parts[1]);
                                passed++;
                                entry.exit();
                            } catch (BlockException e) {
                                // blocked: counted by not counting it
                            }
                        }
                        System.out.println(passed);
                        break;
                    }
                    case "publish":
                        publisher.publish(line.substring("publish ".length()));
                        System.out.println("ok");
                        break;
                    case "quit":
                        source.close();
                        System.out.println("bye");
                        System.out.flush();
                        System.exit(0);
                        return;
                    default:
                        System.out.println("error unknown command " + parts[0]);
                }
            } catch (Exception e) {
                System.out.println("error " + e);
            }
            System.out.flush();
        }
        source.close();
        System.exit(0);
    }
}
