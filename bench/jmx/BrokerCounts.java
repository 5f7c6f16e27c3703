// Prints the local broker's request and topic counters as one JSON object.
// Run as a single-file program: java BrokerCounts.java <broker pid>
// or, to set the level of the broker's request logger (DEBUG logs every request it
// completes, with the client's id; INFO stops it): java BrokerCounts.java <pid> --request-log LEVEL
// It attaches to the broker's JVM (same user) and reads its JMX meters' cumulative counts:
// requests by API (the broker's own included); fetch requests, produce requests, records
// in and bytes in and out by topic; and the long-poll fetches that expired with nothing to
// return (the broker's delayed fetches that timed out, by fetcher type: consumer or follower).
import com.sun.tools.attach.VirtualMachine;
import java.lang.management.ManagementFactory;
import java.util.Map;
import java.util.TreeMap;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class BrokerCounts {
    public static void main(String[] args) throws Exception {
        VirtualMachine vm = VirtualMachine.attach(args[0]);
        String url = vm.startLocalManagementAgent();
        try (JMXConnector connector = JMXConnectorFactory.connect(new JMXServiceURL(url))) {
            MBeanServerConnection server = connector.getMBeanServerConnection();
            if (args.length == 3 && args[1].equals("--request-log")) {
                server.invoke(new ObjectName("kafka:type=kafka.Log4jController"), "setLogLevel",
                              new Object[] {"kafka.request.logger", args[2]},
                              new String[] {"java.lang.String", "java.lang.String"});
                return;
            }
            StringBuilder out = new StringBuilder("{");
            out.append("\"requests\":").append(counts(server, "kafka.network:type=RequestMetrics,name=RequestsPerSec,*", "request"));
            for (String name : new String[] {"TotalFetchRequestsPerSec", "TotalProduceRequestsPerSec", "MessagesInPerSec",
                                               "BytesInPerSec", "BytesOutPerSec"}) {
                out.append(",\"").append(name).append("\":")
                   .append(counts(server, "kafka.server:type=BrokerTopicMetrics,name=" + name + ",topic=*", "topic"));
            }
            // Registered at the first expiry: absent (an empty object) until a fetch has expired.
            out.append(",\"DelayedFetchExpires\":")
               .append(counts(server, "kafka.server:type=DelayedFetchMetrics,name=ExpiresPerSec,*", "fetcherType"));
            System.out.println(out.append("}"));
        } finally {
            vm.detach();
        }
    }

    static String counts(MBeanServerConnection server, String pattern, String tag) throws Exception {
        Map<String, Long> sums = new TreeMap<>();
        for (ObjectName name : server.queryNames(new ObjectName(pattern), null)) {
            long count = ((Number) server.getAttribute(name, "Count")).longValue();
            sums.merge(name.getKeyProperty(tag), count, Long::sum);
        }
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, Long> e : sums.entrySet()) {
            if (out.length() > 1) out.append(",");
            out.append("\"").append(e.getKey()).append("\":").append(e.getValue());
        }
        return out.append("}").toString();
    }
}
